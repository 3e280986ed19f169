"""Study files -> plan -> workers -> rounds -> results -> statistics; rooms: plan -> store; inside."""
