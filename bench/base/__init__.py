"""Small shared helpers every layer may use: where files live, atomic writes, the clock, git.

Size: nine unrelated helpers of 15 to 100 lines each; a subpackage would group what has nothing in common.
"""
