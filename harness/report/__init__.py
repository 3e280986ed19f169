"""Result files -> REPORT.md, DETAILS.md, figures; rooms one way: figures -> sections -> claims -> markup."""
