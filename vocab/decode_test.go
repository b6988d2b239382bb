package vocab

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// gpt2ByteTable builds bytes_to_unicode the way GPT-2's encoder.py does, as
// an independent oracle for byteLevelRune/byteLevelByte.
func gpt2ByteTable() map[byte]rune {
	var bs []int
	for b := int('!'); b <= int('~'); b++ {
		bs = append(bs, b)
	}
	for b := int('¡'); b <= int('¬'); b++ {
		bs = append(bs, b)
	}
	for b := int('®'); b <= int('ÿ'); b++ {
		bs = append(bs, b)
	}
	cs := append([]int(nil), bs...)
	in := map[int]bool{}
	for _, b := range bs {
		in[b] = true
	}
	n := 0
	for b := 0; b < 256; b++ {
		if !in[b] {
			bs = append(bs, b)
			cs = append(cs, 256+n)
			n++
		}
	}
	m := map[byte]rune{}
	for i, b := range bs {
		m[byte(b)] = rune(cs[i])
	}
	return m
}

func TestByteLevelTableMatchesGPT2(t *testing.T) {
	want := gpt2ByteTable()
	if len(want) != 256 {
		t.Fatalf("oracle has %d entries", len(want))
	}
	for b := 0; b < 256; b++ {
		r := byteLevelRune(byte(b))
		if r != want[byte(b)] {
			t.Errorf("byte %#x -> %U, want %U", b, r, want[byte(b)])
		}
		back, ok := byteLevelByte(r)
		if !ok || back != byte(b) {
			t.Errorf("rune %U -> %#x %v, want %#x", r, back, ok, b)
		}
	}
	// Runes outside the table are rejected.
	for _, r := range []rune{0, ' ', '\n', 0x7F, 0xA0, 0xAD, 0x144, 0x2581, 'é' + 0x1000} {
		if b, ok := byteLevelByte(r); ok {
			t.Errorf("rune %U accepted as byte %#x", r, b)
		}
	}
}

func TestDecodeByteLevel(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	tests := []struct {
		name string
		tok  string
		want []byte
	}{
		{"space", "Ġ", []byte(" ")},
		{"word with space", "Ġgo", []byte(" go")},
		{"newline", "Ċ", []byte("\n")},
		{"double newline", "ĊĊ", []byte("\n\n")},
		{"NUL", "Ā", []byte{0}},
		{"soft hyphen", "Ń", []byte{0xAD}},
		{"nbsp", "ł", []byte{0xA0}},
		{"utf8 split: first two bytes of 中", "ä¸", []byte{0xE4, 0xB8}},
		{"all bytes round trip", EncodeByteLevel(all), all},
		{"rune outside table kept raw", "<｜end｜>", []byte("<｜end｜>")},
		{"empty", "", []byte{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := DecodeByteLevel(tc.tok)
			if !bytes.Equal(got, tc.want) {
				t.Errorf("DecodeByteLevel(%q) = %q, want %q", tc.tok, got, tc.want)
			}
		})
	}
}

func TestEncodeByteLevelIsValidUTF8AndPrintable(t *testing.T) {
	for b := 0; b < 256; b++ {
		s := EncodeByteLevel([]byte{byte(b)})
		if !utf8.ValidString(s) || utf8.RuneCountInString(s) != 1 {
			t.Fatalf("byte %#x encodes to %q", b, s)
		}
		r, _ := utf8.DecodeRuneInString(s)
		if r <= ' ' || r == 0x7F {
			t.Errorf("byte %#x encodes to unprintable %U", b, r)
		}
	}
}

func TestDecodeSentencePiece(t *testing.T) {
	tests := []struct {
		tok  string
		want []byte
	}{
		{"▁the", []byte(" the")},
		{"▁▁", []byte("  ")},
		{"a▁b", []byte("a b")},
		{"<0x0A>", []byte("\n")},
		{"<0xE4>", []byte{0xE4}},
		{"<0xe4>", []byte{0xE4}},
		{"<0x00>", []byte{0}},
		{"<0xZZ>", []byte("<0xZZ>")},
		{"<0x0A>x", []byte("<0x0A>x")},
		{"<0x0>", []byte("<0x0>")},
		{"<unused5>", []byte("<unused5>")},
		{"中", []byte("中")},
	}
	for _, tc := range tests {
		t.Run(tc.tok, func(t *testing.T) {
			if got := DecodeSentencePiece(tc.tok); !bytes.Equal(got, tc.want) {
				t.Errorf("DecodeSentencePiece(%q) = %q, want %q", tc.tok, got, tc.want)
			}
		})
	}
}

func TestByteTokenNameRoundTrip(t *testing.T) {
	for b := 0; b < 256; b++ {
		name := ByteTokenName(byte(b))
		got := DecodeSentencePiece(name)
		if len(got) != 1 || got[0] != byte(b) {
			t.Errorf("%s decodes to %q", name, got)
		}
	}
}

func FuzzDecodeByteLevelRoundTrip(f *testing.F) {
	f.Add([]byte("go to countertop 1\n"))
	f.Add([]byte{0, 0xAD, 0xFF, 0x20})
	f.Fuzz(func(t *testing.T, b []byte) {
		if got := DecodeByteLevel(EncodeByteLevel(b)); !bytes.Equal(got, b) {
			t.Fatalf("round trip %q -> %q", b, got)
		}
	})
}
