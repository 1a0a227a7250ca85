//! How keys and values are written on the command line, in `load` input and in every output:
//! escaped text (the default), hex, or base64.
//!
//! Escaped text is defined so that `decode(encode(bytes)) == bytes` for every byte string:
//! - `encode` writes a backslash as `\\`, tab, newline and carriage return as `\t`, `\n`, `\r`,
//!   every byte that is not part of valid UTF-8, and every byte of a control or whitespace
//!   character other than the space, as `\xHH` (two lowercase hex digits); every other
//!   character is written as itself. The output therefore never holds a tab, a newline or a
//!   lone backslash, which is what lets it sit in tab-separated lines.
//! - `decode` reads `\\`, `\t`, `\n`, `\r` and `\xHH` (either case) as escapes, any other byte
//!   as itself, and refuses every other use of a backslash, so that a typo is an error rather
//!   than a different key.
//!
//! Hex is lowercase on output and either case on input. Base64 is the standard alphabet with
//! padding on output; padding is optional on input.
//!
//! Thread-safety: pure functions.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;

/// How bytes are turned into text and back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Printable text with backslash escapes (see the module docs).
    Text,
    /// Two hex digits per byte.
    Hex,
    /// Standard base64.
    Base64,
}

/// Base64 input with or without padding.
const BASE64_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

impl Encoding {
    /// The encoding named by the global `--hex` / `--base64` flags.
    pub fn from_flags(hex: bool, base64: bool) -> Encoding {
        match (hex, base64) {
            (true, _) => Encoding::Hex,
            (_, true) => Encoding::Base64,
            _ => Encoding::Text,
        }
    }

    /// The name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Text => "escaped text",
            Encoding::Hex => "hex",
            Encoding::Base64 => "base64",
        }
    }

    /// `bytes` as text in this encoding.
    pub fn encode(self, bytes: &[u8]) -> String {
        match self {
            Encoding::Text => escape(bytes),
            Encoding::Hex => hex::encode(bytes),
            Encoding::Base64 => STANDARD.encode(bytes),
        }
    }

    /// The bytes that `text` (in this encoding) stands for; the error says what is wrong and
    /// where.
    pub fn decode(self, text: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            Encoding::Text => unescape(text),
            Encoding::Hex => {
                hex::decode(text).map_err(|e| format!("not valid hex ({e}): {}", preview(text)))
            }
            Encoding::Base64 => BASE64_LENIENT
                .decode(text)
                .map_err(|e| format!("not valid base64 ({e}): {}", preview(text))),
        }
    }
}

/// The start of a bad input, for an error message.
fn preview(text: &[u8]) -> String {
    const PREVIEW_BYTES: usize = 40;
    let shown = text.get(..PREVIEW_BYTES).unwrap_or(text);
    let more = if shown.len() < text.len() { "..." } else { "" };
    format!("\"{}{more}\"", escape(shown))
}

fn push_hex_escape(out: &mut String, byte: u8) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\x");
    out.push(char::from(DIGITS[usize::from(byte >> 4)]));
    out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
}

/// Escaped text: see the module docs.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() || (c.is_whitespace() && c != ' ') => {
                    let mut buf = [0u8; 4];
                    for &b in c.encode_utf8(&mut buf).as_bytes() {
                        push_hex_escape(&mut out, b);
                    }
                }
                c => out.push(c),
            }
        }
        for &b in chunk.invalid() {
            push_hex_escape(&mut out, b);
        }
    }
    out
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The inverse of [`escape`]; also accepts any unescaped byte other than a backslash.
pub fn unescape(text: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while let Some(&b) = text.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let bad = |what: &str| {
            Err(format!(
                "{what} at byte {i} of {}; escapes are \\\\, \\t, \\n, \\r and \\xHH",
                preview(text)
            ))
        };
        match text.get(i + 1) {
            Some(b'\\') => out.push(b'\\'),
            Some(b't') => out.push(b'\t'),
            Some(b'n') => out.push(b'\n'),
            Some(b'r') => out.push(b'\r'),
            Some(b'x') => {
                let high = text.get(i + 2).copied().and_then(hex_digit);
                let low = text.get(i + 3).copied().and_then(hex_digit);
                match (high, low) {
                    (Some(h), Some(l)) => out.push((h << 4) | l),
                    _ => return bad("\\x not followed by two hex digits"),
                }
                i += 4;
                continue;
            }
            Some(_) => return bad("unknown escape"),
            None => return bad("lone backslash at the end"),
        }
        i += 2;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips_in_every_encoding() {
        let all: Vec<u8> = (0..=255u8).collect();
        let samples: Vec<Vec<u8>> = vec![
            Vec::new(),
            all.clone(),
            all.iter().rev().copied().collect(),
            "héllo wörld ✓ \u{2028} \u{a0}".as_bytes().to_vec(),
            b"back\\slash\\x41 tab\tnl\n".to_vec(),
            vec![0xe2, 0x9c],
        ];
        for enc in [Encoding::Text, Encoding::Hex, Encoding::Base64] {
            for s in &samples {
                let text = enc.encode(s);
                assert!(!text.contains('\t') && !text.contains('\n'), "{text}");
                assert_eq!(&enc.decode(text.as_bytes()).expect("decode"), s, "{enc:?}");
            }
        }
    }

    #[test]
    fn text_escapes_are_readable() {
        assert_eq!(escape(b"a\x00b\tc\\d\n\xff"), "a\\x00b\\tc\\\\d\\n\\xff");
        assert_eq!(escape("ünï code".as_bytes()), "ünï code");
        assert_eq!(escape("\u{2028}".as_bytes()), "\\xe2\\x80\\xa8");
        assert_eq!(unescape(b"\\x4A\\x4b").expect("unescape"), b"JK");
    }

    #[test]
    fn bad_escapes_are_refused() {
        for bad in [&b"a\\q"[..], b"a\\", b"\\x4", b"\\xzz"] {
            let e = unescape(bad).expect_err("must refuse");
            assert!(e.contains("escape") || e.contains("backslash"), "{e}");
        }
        assert!(Encoding::Hex.decode(b"abc").is_err());
        assert!(Encoding::Base64.decode(b"a*b").is_err());
        assert_eq!(Encoding::Base64.decode(b"YQ").expect("unpadded"), b"a");
    }
}
