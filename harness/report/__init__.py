"""Result files -> REPORT.md, DETAILS.md; rooms one way: sections -> claims -> markup."""
