//! SQL `LIKE` patterns: `%` matches any run of characters (none included), `_` exactly one
//! character, and an optional escape character makes the character after it literal (there
//! is none by default, as in the SQL standard). `ILIKE` compares both sides lowercased.
//!
//! A pattern is compiled once into its pieces between `%`s: the first must match at the
//! start, the last at the end, and the ones between, in order, each at its leftmost place
//! after the one before. Every piece matches a fixed number of characters, so the leftmost
//! place is always the right one. Pieces without `_` are searched as bytes (`memchr`'s
//! substring search); `_` steps over one UTF-8 character (one byte where the bytes are not
//! UTF-8).

use std::fmt;
use zipflow_core::{Error, Result};

/// One element of a piece: a literal character, or `_`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Char(char),
    One,
}

/// The characters between two `%`s.
#[derive(Debug, Clone)]
struct Piece {
    tokens: Vec<Token>,
    /// A searcher for the piece's bytes when it has no `_` (its needle is those bytes).
    finder: Option<memchr::memmem::Finder<'static>>,
}

impl Piece {
    fn new(tokens: Vec<Token>) -> Piece {
        let finder = tokens
            .iter()
            .map(|t| match t {
                Token::Char(c) => Some(*c),
                Token::One => None,
            })
            .collect::<Option<String>>()
            .map(|b| memchr::memmem::Finder::new(b.as_bytes()).into_owned());
        Piece { tokens, finder }
    }

    /// The end of this piece matched at byte `at` of `s`, if it matches there.
    fn match_at(&self, s: &[u8], at: usize) -> Option<usize> {
        if let Some(f) = &self.finder {
            let b = f.needle();
            // An empty piece skips the comparison: a zero-length `memcmp` at the string's end
            // cost more than the rest of the match on the machine this was measured on.
            let ok = b.is_empty() && at <= s.len() || s.get(at..)?.starts_with(b);
            return ok.then_some(at + b.len());
        }
        let mut p = at;
        let mut buf = [0u8; 4];
        for t in &self.tokens {
            match t {
                Token::Char(c) => {
                    let b = c.encode_utf8(&mut buf).as_bytes();
                    if !s.get(p..)?.starts_with(b) {
                        return None;
                    }
                    p += b.len();
                }
                Token::One => p += char_len(s, p)?,
            }
        }
        Some(p)
    }

    /// The leftmost match starting at or after byte `from`: its start and end.
    fn find(&self, s: &[u8], from: usize) -> Option<(usize, usize)> {
        if let Some(f) = &self.finder {
            let i = f.find(s.get(from..)?)?;
            return Some((from + i, from + i + f.needle().len()));
        }
        let mut p = from;
        while p <= s.len() {
            if let Some(end) = self.match_at(s, p) {
                return Some((p, end));
            }
            p += char_len(s, p)?;
        }
        None
    }

    /// The characters the piece matches.
    fn chars(&self) -> usize {
        self.tokens.len()
    }
}

/// The length of the character at byte `p` of `s` (one byte where `s` is not UTF-8 there),
/// `None` at the end.
fn char_len(s: &[u8], p: usize) -> Option<usize> {
    let lead = *s.get(p)?;
    let n = match lead {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    };
    let ok = n == 1
        || s.get(p + 1..p + n)
            .is_some_and(|c| c.iter().all(|&b| b & 0xc0 == 0x80));
    Some(if ok { n } else { 1 })
}

/// The byte where the last `chars` characters of `s` start (each a UTF-8 character, or a byte
/// that is not part of one), `None` when `s` has fewer.
fn start_of_last(s: &[u8], chars: usize) -> Option<usize> {
    let mut p = s.len();
    for _ in 0..chars {
        if p == 0 {
            return None;
        }
        // Step back over continuation bytes to a lead byte whose character ends at p.
        let mut q = p - 1;
        while q > 0 && s[q] & 0xc0 == 0x80 && p - q < 4 {
            q -= 1;
        }
        p = if char_len(s, q) == Some(p - q) {
            q
        } else {
            p - 1
        };
    }
    Some(p)
}

/// A compiled `LIKE` (or `ILIKE`) pattern. Two are equal when written the same way.
#[derive(Debug, Clone)]
pub struct LikePattern {
    /// The pattern as written.
    text: String,
    escape: Option<char>,
    /// Whether both sides are compared lowercased (`ILIKE`).
    fold_case: bool,
    /// The pieces between `%`s; a pattern without `%` has one.
    pieces: Vec<Piece>,
}

impl LikePattern {
    /// Compiles `pattern` with the optional escape character; `fold_case` for `ILIKE`.
    pub fn new(pattern: &str, escape: Option<char>, fold_case: bool) -> Result<LikePattern> {
        let folded;
        let text = if fold_case {
            folded = pattern.to_lowercase();
            &folded
        } else {
            pattern
        };
        let mut pieces = Vec::new();
        let mut tokens = Vec::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if Some(c) == escape {
                match chars.next() {
                    Some(x) => tokens.push(Token::Char(x)),
                    None => {
                        return Err(Error::invalid(format!(
                            "LIKE pattern `{pattern}` ends with its escape character `{c}`"
                        )));
                    }
                }
            } else if c == '%' {
                pieces.push(Piece::new(std::mem::take(&mut tokens)));
            } else if c == '_' {
                tokens.push(Token::One);
            } else {
                tokens.push(Token::Char(c));
            }
        }
        pieces.push(Piece::new(tokens));
        Ok(LikePattern {
            text: pattern.to_string(),
            escape,
            fold_case,
            pieces,
        })
    }

    /// Whether `s` matches.
    pub fn matches(&self, s: &[u8]) -> bool {
        if self.fold_case {
            let lower = String::from_utf8_lossy(s).to_lowercase();
            self.matches_folded(lower.as_bytes())
        } else {
            self.matches_folded(s)
        }
    }

    fn matches_folded(&self, s: &[u8]) -> bool {
        let (first, rest) = match self.pieces.split_first() {
            Some(x) => x,
            None => return s.is_empty(),
        };
        let Some(mut pos) = first.match_at(s, 0) else {
            return false;
        };
        let Some((last, middle)) = rest.split_last() else {
            // No `%`: the one piece is the whole string.
            return pos == s.len();
        };
        // The last piece ends the string, after the first.
        let Some(tail) = start_of_last(s, last.chars()) else {
            return false;
        };
        if tail < pos || last.match_at(s, tail) != Some(s.len()) {
            return false;
        }
        let s = &s[..tail];
        for piece in middle {
            if piece.tokens.is_empty() {
                continue;
            }
            match piece.find(s, pos) {
                Some((_, end)) => pos = end,
                None => return false,
            }
        }
        true
    }
}

impl PartialEq for LikePattern {
    fn eq(&self, other: &LikePattern) -> bool {
        (&self.text, self.escape, self.fold_case) == (&other.text, other.escape, other.fold_case)
    }
}

impl Eq for LikePattern {}

impl fmt::Display for LikePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}'", self.text.replace('\'', "''"))?;
        if let Some(c) = self.escape {
            write!(f, " ESCAPE '{c}'")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain backtracking matcher over characters: the reference.
    fn reference(p: &[Token2], s: &[char]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((Token2::Any, rest)) => (0..=s.len()).any(|i| reference(rest, &s[i..])),
            Some((Token2::One, rest)) => !s.is_empty() && reference(rest, &s[1..]),
            Some((Token2::Char(c), rest)) => s.first() == Some(c) && reference(rest, &s[1..]),
        }
    }

    #[derive(Clone, Copy)]
    enum Token2 {
        Any,
        One,
        Char(char),
    }

    fn like(p: &str, s: &str) -> bool {
        LikePattern::new(p, None, false)
            .map(|l| l.matches(s.as_bytes()))
            .unwrap_or(false)
    }

    #[test]
    fn examples() {
        assert!(like("", ""));
        assert!(!like("", "a"));
        assert!(like("%", ""));
        assert!(like("%", "anything"));
        assert!(like("abc", "abc"));
        assert!(!like("abc", "abcd"));
        assert!(like("a%", "abc"));
        assert!(!like("a%", "bac"));
        assert!(like("%c", "abc"));
        assert!(like("%b%", "abc"));
        assert!(!like("%d%", "abc"));
        assert!(like("a_c", "abc"));
        assert!(!like("a_c", "ac"));
        assert!(like("_", "é"));
        assert!(like("__", "日本"));
        assert!(!like("_", "日本"));
        assert!(like("%日_%", "x日本y"));
        assert!(like("%aa%aa", "aaaa"));
        assert!(!like("%aa%aa", "aaa"));
        assert!(like("a%%b", "ab"));
        assert!(like("%fox%", "the quick fox jumps"));
        assert!(!like("ab%ba", "aba"));
        let esc = LikePattern::new("10!%%", Some('!'), false).unwrap_or_else(|e| panic!("{e}"));
        assert!(esc.matches(b"10% off"));
        assert!(!esc.matches(b"100 off"));
        assert!(LikePattern::new("a!", Some('!'), false).is_err());
        let i = LikePattern::new("%FOX%", None, true).unwrap_or_else(|e| panic!("{e}"));
        assert!(i.matches(b"a Fox"));
        // Bytes that are not UTF-8: `_` takes one byte.
        let p = LikePattern::new("a_b", None, false).unwrap_or_else(|e| panic!("{e}"));
        assert!(p.matches(&[b'a', 0xff, b'b']));
        assert!(p.matches(&[b'a', 0xc3, 0xa9, b'b']));
        assert!(!p.matches(&[b'a', 0xc3, 0xa9, 0xa9, b'b']));
    }

    #[test]
    fn agrees_with_backtracking_on_every_short_case() {
        // Every pattern of up to 5 tokens over {%, _, a, b} against every string of up to 6
        // characters over {a, b, é}.
        let toks = [
            Token2::Any,
            Token2::One,
            Token2::Char('a'),
            Token2::Char('b'),
        ];
        let alphabet = ['a', 'b', 'é'];
        let mut patterns: Vec<Vec<Token2>> = vec![vec![]];
        for _ in 0..5 {
            let next: Vec<Vec<Token2>> = patterns
                .iter()
                .filter(|p| p.len() == patterns.last().map_or(0, Vec::len))
                .flat_map(|p| {
                    toks.iter().map(move |&t| {
                        let mut q = p.clone();
                        q.push(t);
                        q
                    })
                })
                .collect();
            patterns.extend(next);
        }
        let mut strings: Vec<Vec<char>> = vec![vec![]];
        let mut frontier = strings.clone();
        for _ in 0..6 {
            frontier = frontier
                .iter()
                .flat_map(|s| {
                    alphabet.iter().map(move |&c| {
                        let mut t = s.clone();
                        t.push(c);
                        t
                    })
                })
                .collect();
            strings.extend(frontier.iter().cloned());
        }
        let mut checked = 0;
        for p in &patterns {
            let text: String = p
                .iter()
                .map(|t| match t {
                    Token2::Any => '%',
                    Token2::One => '_',
                    Token2::Char(c) => *c,
                })
                .collect();
            let compiled = LikePattern::new(&text, None, false).unwrap_or_else(|e| panic!("{e}"));
            for s in &strings {
                let st: String = s.iter().collect();
                assert_eq!(
                    compiled.matches(st.as_bytes()),
                    reference(p, s),
                    "`{st}` LIKE '{text}'"
                );
                checked += 1;
            }
        }
        assert!(checked > 1_000_000, "{checked}");
    }
}
