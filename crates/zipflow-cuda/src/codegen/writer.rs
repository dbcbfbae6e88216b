//! An indenting writer for CUDA C: lines at the current depth (two spaces a level), blocks
//! opened and closed around them, so emitted code carries no hard-coded indentation.

/// CUDA C text under construction, with the depth of the next line.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    out: String,
    depth: usize,
}

impl Writer {
    /// A writer whose lines start `depth` levels in (a function body's are one).
    pub(crate) fn at(depth: usize) -> Writer {
        Writer {
            out: String::new(),
            depth,
        }
    }

    /// One line at the current depth.
    pub(crate) fn line(&mut self, text: impl AsRef<str>) -> &mut Writer {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(text.as_ref());
        self.out.push('\n');
        self
    }

    /// An empty line.
    pub(crate) fn blank(&mut self) -> &mut Writer {
        self.out.push('\n');
        self
    }

    /// A line at column 0, whatever the depth (preprocessor directives such as `#pragma`).
    pub(crate) fn directive(&mut self, text: impl AsRef<str>) -> &mut Writer {
        self.out.push_str(text.as_ref());
        self.out.push('\n');
        self
    }

    /// Each line of `text`, a template written without its absolute indentation, at the
    /// current depth: a line's own leading spaces (its depth within the template) follow the
    /// depth's, an empty line stays empty and a line that starts with `#` (a preprocessor
    /// directive) goes at column 0. The last line ends in a newline whether or not `text`
    /// does; a final newline adds no empty line.
    pub(crate) fn lines(&mut self, text: impl AsRef<str>) -> &mut Writer {
        for l in text.as_ref().lines() {
            if l.is_empty() {
                self.blank();
            } else if l.starts_with('#') {
                self.directive(l);
            } else {
                self.line(l);
            }
        }
        self
    }

    /// Text already laid out (whole lines, each ending in a newline), as it is.
    pub(crate) fn raw(&mut self, text: impl AsRef<str>) -> &mut Writer {
        self.out.push_str(text.as_ref());
        self
    }

    /// `head {` at the current depth; the lines after it go one level in.
    pub(crate) fn open(&mut self, head: impl AsRef<str>) -> &mut Writer {
        let head = head.as_ref();
        if head.is_empty() {
            self.line("{");
        } else {
            self.line(format!("{head} {{"));
        }
        self.depth += 1;
        self
    }

    /// `{ // comment`: a bare block, its lines one level in.
    pub(crate) fn scope(&mut self, comment: impl AsRef<str>) -> &mut Writer {
        self.line(format!("{{ // {}", comment.as_ref()));
        self.depth += 1;
        self
    }

    /// `}` one level out, closing the block [`Writer::open`] began.
    pub(crate) fn close(&mut self) -> &mut Writer {
        self.close_with("")
    }

    /// `}` and `tail` on the same line (`} else {` takes [`Writer::open`] again instead).
    pub(crate) fn close_with(&mut self, tail: impl AsRef<str>) -> &mut Writer {
        self.depth = self.depth.saturating_sub(1);
        self.line(format!("}}{}", tail.as_ref()))
    }

    /// `} else {`: closes a block and opens the next at the same depth.
    pub(crate) fn reopen(&mut self, head: impl AsRef<str>) -> &mut Writer {
        self.depth = self.depth.saturating_sub(1);
        self.open(format!("}} {}", head.as_ref()))
    }

    /// The text written.
    pub(crate) fn finish(&mut self) -> String {
        std::mem::take(&mut self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::Writer;

    #[test]
    fn blocks_indent_their_lines_two_spaces_a_level() {
        let mut w = Writer::at(1);
        w.line("const u32 c = 1u;")
            .open("if (c != 0u)")
            .line("x = c;")
            .reopen("else")
            .directive("#pragma unroll")
            .line("x = 0u;")
            .close()
            .blank();
        assert_eq!(
            w.finish(),
            "  const u32 c = 1u;\n  if (c != 0u) {\n    x = c;\n  } else {\n#pragma unroll\n    x = 0u;\n  }\n\n"
        );
    }

    #[test]
    fn templates_keep_their_own_indentation_below_the_depth() {
        let mut w = Writer::at(2);
        w.lines("if (c) {\n#pragma unroll\n  x = c;\n\n}\n")
            .lines("y = x;");
        assert_eq!(
            w.finish(),
            "    if (c) {\n#pragma unroll\n      x = c;\n\n    }\n    y = x;\n"
        );
    }
}
