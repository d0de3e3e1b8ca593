"""Constrained decoding: the grammar an upstream is told to keep an emulated answer in.

``grammars`` builds, per format and tool list, a GBNF grammar whose sentences are exactly the
calls that format's parser reads (cached, bounded) and the body fields each upstream dialect
takes. The format owns its grammar's shape (``ToolFormat.grammar``, a ``formats.CallGrammar``);
this folder hands it the value rules and never names a format itself. ``schema_gbnf`` turns a
tool's JSON Schema into GBNF with llama.cpp's own converter; ``intrange`` writes integer bounds
as GBNF. Sans-IO; imports ``config``, ``formats`` and ``wire``.
"""
