"""What the operator configures: settings (environment and flags), rules files (a strict ``RuleSet``),
the allowlist of chat fields forwarded upstream, and the CPU budget that sizes workers.

Read once at start and on reload; no I/O beyond reading files. Imports ``formats`` (a rule names a
format) and ``observe``; nothing of the server, chat path or upstream clients.
"""
