package vocab

import "strings"

// GPT-2's bytes_to_unicode maps the 188 "printable" bytes ('!'..'~',
// '¡'..'¬', '®'..'ÿ') to the rune of the same value and the other 68 bytes,
// in increasing order, to U+0100..U+0143. Both directions are computed here
// rather than tabled.

// byteLevelRune returns the rune that byte-level BPE writes for b.
func byteLevelRune(b byte) rune {
	switch {
	case b >= 0x21 && b <= 0x7E, b >= 0xA1 && b <= 0xAC, b >= 0xAE:
		return rune(b)
	case b <= 0x20: // 0x00..0x20 are the first 33 unprintable bytes
		return 0x100 + rune(b)
	case b <= 0xA0: // 0x7F..0xA0 are the next 34
		return 0x100 + 33 + rune(b-0x7F)
	default: // 0xAD is the last
		return 0x143
	}
}

// byteLevelByte inverts byteLevelRune.
func byteLevelByte(r rune) (byte, bool) {
	switch {
	case r >= 0x21 && r <= 0x7E, r >= 0xA1 && r <= 0xAC, r >= 0xAE && r <= 0xFF:
		return byte(r), true
	case r >= 0x100 && r <= 0x120:
		return byte(r - 0x100), true
	case r >= 0x121 && r <= 0x142:
		return byte(r - 0x121 + 0x7F), true
	case r == 0x143:
		return 0xAD, true
	}
	return 0, false
}

// DecodeByteLevel returns the bytes a byte-level BPE token string stands for
// (the inverse of GPT-2's bytes_to_unicode: "Ġ" is a space, "Ċ" a newline,
// "Ā" a NUL byte). A string with a rune outside the table (an added token
// such as "<｜end▁of▁sentence｜>") is returned as its own UTF-8 bytes, as
// Hugging Face's ByteLevel decoder does.
func DecodeByteLevel(tok string) []byte {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := byteLevelByte(r)
		if !ok {
			return []byte(tok)
		}
		out = append(out, b)
	}
	return out
}

// EncodeByteLevel spells bytes in byte-level BPE's alphabet, one rune per
// byte (GPT-2's bytes_to_unicode); DecodeByteLevel inverts it.
func EncodeByteLevel(b []byte) string {
	var sb strings.Builder
	sb.Grow(2 * len(b))
	for _, c := range b {
		sb.WriteRune(byteLevelRune(c))
	}
	return sb.String()
}

// SentencePieceSpace is the rune SentencePiece writes for a space (U+2581).
const SentencePieceSpace = "\u2581"

// DecodeSentencePiece returns the bytes a SentencePiece-style piece stands
// for: a byte-fallback token "<0xNN>" (exactly six characters, two hex
// digits of either case) is the single byte 0xNN, possibly half of a UTF-8
// character; any other piece has every "▁" replaced by a space. This is
// Hugging Face's Replace("▁", " ") + ByteFallback decoder chain, without the
// leading-space Strip some tokenizers apply to a whole text.
func DecodeSentencePiece(tok string) []byte {
	if b, ok := byteToken(tok); ok {
		return []byte{b}
	}
	return []byte(strings.ReplaceAll(tok, SentencePieceSpace, " "))
}

// EncodeSentencePiece spells text as SentencePiece writes it: spaces become
// "▁". Bytes are not split into byte-fallback tokens.
func EncodeSentencePiece(text string) string {
	return strings.ReplaceAll(text, " ", SentencePieceSpace)
}

// ByteTokenName returns the byte-fallback token string for b ("<0x0A>").
func ByteTokenName(b byte) string {
	const hex = "0123456789ABCDEF"
	return string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})
}

func isByteToken(s string) bool {
	_, ok := byteToken(s)
	return ok
}

// byteToken parses "<0xNN>".
func byteToken(s string) (byte, bool) {
	if len(s) != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexDigit(s[3])
	lo, ok2 := hexDigit(s[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
