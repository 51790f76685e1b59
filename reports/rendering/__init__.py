"""Rendering: figures (figures), the report document as Markdown, HTML and LaTeX tables
(document, report.css), the article (latex) and one escaping function per output format
(escape)."""
