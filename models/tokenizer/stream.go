package tokenizer

import "unicode/utf8"

// StreamDecoder turns ids into text one at a time during generation. A
// character can be spread over several tokens (byte fallback, or byte-level
// BPE splitting an emoji), so printing each Piece as it comes would print
// broken UTF-8; the decoder holds an incomplete sequence back until the
// bytes that complete it arrive. Pieces are joined raw, leading spaces
// included, since generated tokens continue the prompt's text.
type StreamDecoder struct {
	t   *Tokenizer
	buf []byte
}

// NewDecoder starts a stream.
func (t *Tokenizer) NewDecoder() *StreamDecoder { return &StreamDecoder{t: t} }

// Add appends id and returns the text that is now complete: always valid
// UTF-8, possibly empty. Bytes that cannot start or continue a character
// come out as U+FFFD at once rather than being held forever.
func (d *StreamDecoder) Add(id int) string {
	d.buf = append(d.buf, d.t.Piece(id)...)
	return d.emit(false)
}

// Flush returns whatever is held back (an unfinished sequence, as U+FFFD per
// byte) and resets the decoder.
func (d *StreamDecoder) Flush() string { return d.emit(true) }

func (d *StreamDecoder) emit(final bool) string {
	out := make([]byte, 0, len(d.buf))
	i := 0
	for i < len(d.buf) {
		r, n := utf8.DecodeRune(d.buf[i:])
		if r != utf8.RuneError || n > 1 {
			out = append(out, d.buf[i:i+n]...)
			i += n
			continue
		}
		if !final && incompletePrefix(d.buf[i:]) {
			break
		}
		out = append(out, "\uFFFD"...)
		i++
	}
	d.buf = append(d.buf[:0], d.buf[i:]...)
	return string(out)
}

// incompletePrefix reports whether b, which does not decode, is the start of
// a valid sequence cut short, so more bytes could still complete it.
func incompletePrefix(b []byte) bool {
	n := utf8Len(b[0])
	if n == 1 || len(b) >= n || b[0] < 0xC2 || b[0] > 0xF4 {
		return false
	}
	// Check the bytes present against the ranges utf8 allows after this
	// lead byte; a wrong second byte can never be completed.
	for k := 1; k < len(b); k++ {
		lo, hi := byte(0x80), byte(0xBF)
		if k == 1 {
			switch b[0] {
			case 0xE0:
				lo = 0xA0
			case 0xED:
				hi = 0x9F
			case 0xF0:
				lo = 0x90
			case 0xF4:
				hi = 0x8F
			}
		}
		if b[k] < lo || b[k] > hi {
			return false
		}
	}
	return true
}
