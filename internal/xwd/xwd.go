// Package xwd reads X window dumps (what xwd writes): the screenshots
// `make screenshots` takes of a real window under Xvfb, where reading back
// the GL front buffer gives nothing.
package xwd

import (
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"io"
)

// header is the fixed part of an XWD file (version 7), big-endian.
type header struct {
	HeaderSize, Version, Format, Depth, Width, Height, XOffset, ByteOrder, BitmapUnit,
	BitmapBitOrder, BitmapPad, BitsPerPixel, BytesPerLine, VisualClass, RedMask, GreenMask, BlueMask,
	BitsPerRGB, ColormapEntries, NColors, WindowWidth, WindowHeight, WindowX, WindowY, WindowBorder uint32
}

const zPixmap = 2

// Decode reads a ZPixmap dump of 24 or 32 bits per pixel, as a TrueColor
// X server (Xvfb) writes it.
func Decode(r io.Reader) (image.Image, error) {
	var h header
	if err := binary.Read(r, binary.BigEndian, &h); err != nil {
		return nil, fmt.Errorf("xwd: %w", err)
	}
	if h.Version != 7 || h.Format != zPixmap || (h.BitsPerPixel != 32 && h.BitsPerPixel != 24) ||
		h.Width == 0 || h.Height == 0 || h.Width > 1<<15 || h.Height > 1<<15 || h.BytesPerLine < h.Width*h.BitsPerPixel/8 {
		return nil, fmt.Errorf("xwd: a version %d, format %d, %d-bit dump of %d×%d is not one this reads", h.Version, h.Format, h.BitsPerPixel, h.Width, h.Height)
	}
	// The window name, then the colormap: skipped.
	if _, err := io.CopyN(io.Discard, r, int64(h.HeaderSize)-100+int64(h.NColors)*12); err != nil {
		return nil, fmt.Errorf("xwd: %w", err)
	}
	img := image.NewRGBA(image.Rect(0, 0, int(h.Width), int(h.Height)))
	line := make([]byte, h.BytesPerLine)
	bpp := int(h.BitsPerPixel / 8)
	shift := func(mask uint32) uint {
		s := uint(0)
		for mask != 0 && mask&1 == 0 {
			mask >>= 1
			s++
		}
		return s
	}
	rs, gs, bs := shift(h.RedMask), shift(h.GreenMask), shift(h.BlueMask)
	for y := 0; y < int(h.Height); y++ {
		if _, err := io.ReadFull(r, line); err != nil {
			return nil, fmt.Errorf("xwd: row %d: %w", y, err)
		}
		for x := 0; x < int(h.Width); x++ {
			p := line[x*bpp : x*bpp+bpp]
			var v uint32
			for i := range bpp {
				if h.ByteOrder == 0 { // LSBFirst
					v |= uint32(p[i]) << (8 * i)
				} else {
					v = v<<8 | uint32(p[i])
				}
			}
			img.Set(x, y, color.RGBA{uint8(v >> rs), uint8(v >> gs), uint8(v >> bs), 0xff})
		}
	}
	return img, nil
}
