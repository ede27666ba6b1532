"""Series as they arrive by mail: an mbox (or maildir, or one mail on stdin) becomes commits of
a checkout flagbench owns, measured as `flagbench series` measures commits.

    parse.py   the mails: cover letter, [PATCH vN k/n] prefixes, base-commit:, untrusted input
               refused with one line (sizes, paths outside the tree)
    apply.py   `git am` of each patch in a clone flagbench owns under its cache (never the
               user's repository), onto the base; a patch that does not apply: which file, hunk
    run.py     the applied commits measured by series.py, rows carrying subject and author
    match.py   v1 against v2: `git range-diff`'s pairing, a table per matched patch
    check.py   b4's check JSON and patchwork's check from budgets the experiment declares
"""
