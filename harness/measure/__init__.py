"""Study files -> plan -> worker processes -> rounds -> JSON-lines results -> statistics."""
