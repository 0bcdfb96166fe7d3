package xwd

import (
	"bytes"
	"encoding/binary"
	"image/color"
	"testing"
)

// A 3×2 dump, LSB first, 32 bits per pixel, read back pixel for pixel;
// a dump of another kind is refused.
func TestDecode(t *testing.T) {
	var b bytes.Buffer
	name := []byte("win\x00")
	h := header{HeaderSize: 100 + uint32(len(name)), Version: 7, Format: zPixmap, Depth: 24, Width: 3, Height: 2,
		BitsPerPixel: 32, BytesPerLine: 16, VisualClass: 4, RedMask: 0xff0000, GreenMask: 0xff00, BlueMask: 0xff, NColors: 1}
	binary.Write(&b, binary.BigEndian, h)
	b.Write(name)
	b.Write(make([]byte, 12)) // one colormap entry
	px := []color.RGBA{{1, 2, 3, 255}, {250, 0, 10, 255}, {0, 200, 0, 255}, {9, 9, 9, 255}, {255, 255, 255, 255}, {0, 0, 0, 255}}
	for y := range 2 {
		for x := range 4 { // a padding pixel per line
			c := color.RGBA{}
			if x < 3 {
				c = px[y*3+x]
			}
			b.Write([]byte{c.B, c.G, c.R, 0})
		}
	}
	img, err := Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range px {
		if got := img.At(i%3, i/3); got != want {
			t.Errorf("pixel %d: %v, want %v", i, got, want)
		}
	}
	h.Format = 1
	b.Reset()
	binary.Write(&b, binary.BigEndian, h)
	if _, err := Decode(&b); err == nil {
		t.Error("an XYPixmap read")
	}
}
