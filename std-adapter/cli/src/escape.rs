//! Text from users (object and container names, above all) shown in
//! errors: control characters and bidirectional overrides are escaped, so
//! that a name cannot move the cursor, recolour the terminal, hide part of
//! a message or make it read backwards (CVE-2021-42574's "Trojan Source").
//!
//! [`escape`] escapes one piece of text (a name, a one-line message);
//! [`Escaping`] escapes what is written through it, line breaks kept (the
//! standard error of the commands).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Whether `c` must not reach a terminal as it is: a control character
/// (C0, DEL, C1) or a bidirectional formatting character (the embeddings,
/// overrides and isolates, and the marks).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every [unsafe](is_unsafe) character escaped as Rust writes
/// it (`\n`, `\t`, `\r`, `\u{1b}`, `\u{202e}`), and a backslash before one
/// doubled so that the escapes cannot be forged. Line breaks too are
/// escaped unless `keep_lines` (for text made of lines).
pub fn escape(text: &str, keep_lines: bool) -> Cow<'_, str> {
    let needs = |c: char| is_unsafe(c) && !(keep_lines && c == '\n');
    if !text.chars().any(needs) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().saturating_add(16));
    for c in text.chars() {
        if !needs(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            other => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(other));
            }
        }
    }
    Cow::Owned(out)
}

/// A writer that escapes what goes through it ([`escape`], line breaks
/// and tabs kept), for a command's standard error. Bytes that are not
/// UTF-8 are written `\xNN`.
#[derive(Debug)]
pub struct Escaping<W: Write> {
    inner: W,
    /// The start of a character cut by the end of the last write.
    pending: Vec<u8>,
}

impl<W: Write> Escaping<W> {
    /// Escapes what is written to `inner`.
    pub fn new(inner: W) -> Self {
        Escaping {
            inner,
            pending: Vec::new(),
        }
    }

    fn emit(&mut self, text: &str) -> io::Result<()> {
        let escaped: String = text
            .split('\t')
            .map(|part| escape(part, true))
            .collect::<Vec<_>>()
            .join("\t");
        self.inner.write_all(escaped.as_bytes())
    }
}

impl<W: Write> Write for Escaping<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut bytes = std::mem::take(&mut self.pending);
        bytes.extend_from_slice(buf);
        let mut rest = &bytes[..];
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    self.emit(text)?;
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // Valid up to there: checked by `from_utf8`.
                    self.emit(std::str::from_utf8(good).unwrap_or_default())?;
                    match e.error_len() {
                        None => {
                            // A character cut short: the next write ends it.
                            self.pending = bad.to_vec();
                            break;
                        }
                        Some(n) => {
                            let (invalid, after) = bad.split_at(n.min(bad.len()));
                            for b in invalid {
                                write!(self.inner, "\\x{b:02x}")?;
                            }
                            rest = after;
                        }
                    }
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            for b in pending {
                write!(self.inner, "\\x{b:02x}")?;
            }
        }
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_overrides_are_escaped() {
        assert_eq!(escape("web", false), "web");
        assert_eq!(
            escape("a\u{1b}[31mb\u{202e}c\nd\u{7}", false),
            "a\\u{1b}[31mb\\u{202e}c\\nd\\u{7}"
        );
        assert_eq!(escape("a\nb\u{2066}", true), "a\nb\\u{2066}");
    }

    #[test]
    fn the_writer_escapes_across_writes_and_keeps_lines() {
        let mut w = Escaping::new(Vec::new());
        let text = "x\u{202e}y\u{1b}\tz\n".as_bytes();
        let (a, b) = text.split_at(2); // inside U+202E
        w.write_all(a).expect("written");
        w.write_all(b).expect("written");
        w.write_all(b"\xff\n").expect("written");
        w.flush().expect("flushed");
        assert_eq!(
            String::from_utf8(w.inner).expect("utf-8"),
            "x\\u{202e}y\\u{1b}\tz\n\\xff\n"
        );
    }
}
