"""Benchmarks: commands that print figures (never timed tests)."""

#: how a bench reads its child processes' output: UTF-8 whatever the locale, an undecodable byte
#: replaced (under an ASCII locale a progress bar's box-drawing characters once killed the soak's
#: rebuilder thread)
TEXT = {"text": True, "encoding": "utf-8", "errors": "replace"}
