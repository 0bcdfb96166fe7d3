package dgf

import (
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/device"
	"dovetail/dgf/dgftest"
	"dovetail/models"
)

// copyingDevice is a host device that copies each matrix it uploads into
// memory of its own, as a GPU does (device.CopiesMatrices).
type copyingDevice struct {
	device.Device
	own     map[device.Matrix]*models.Tensor
	uploads int
}

func (c *copyingDevice) CopiesMatrices() bool    { return true }
func (c *copyingDevice) KeepsFloat32(n int) bool { return device.KeepsFloat32(c.Device, n) }
func (c *copyingDevice) UploadMatrix(t *models.Tensor) (device.Matrix, error) {
	cp := *t
	cp.Data = slices.Clone(t.Data)
	m, err := c.Device.UploadMatrix(&cp)
	if err == nil {
		c.own[m] = &cp
		c.uploads++
	}
	return m, err
}
func (c *copyingDevice) UpdateMatrix(m device.Matrix, t *models.Tensor) error {
	copy(c.own[m].Data, t.Data)
	return nil
}
func (c *copyingDevice) DownloadMatrix(m device.Matrix, dst []byte) error {
	copy(dst, c.own[m].Data)
	return nil
}
func (c *copyingDevice) FreeMatrix(m device.Matrix) { delete(c.own, m) }

// On a device that keeps its own copy of each matrix (a GPU), a frozen
// draft keeps no host bytes of its Q8_0 copies: it reads them back for
// its values, re-freezes into the same matrices, gives them back when
// freed, and drafts as the host's frozen draft of the same weights.
func TestFrozenCopiesLiveOnTheDevice(t *testing.T) {
	c := freezeConfig
	large := device.HostConfig{Threads: 2, Float32Upto: c.Hidden * c.Hidden}
	cdev := &copyingDevice{Device: device.NewHostWith(large), own: map[device.Matrix]*models.Tensor{}}
	d := newDraftOn(t, cdev, c, 5)
	ref := newDraftOn(t, device.NewHostWith(large), c, 5)
	for _, x := range []*Draft{d, ref} {
		if err := x.FreezeForDrafting(); err != nil {
			t.Fatal(err)
		}
		x.DropFloat()
	}
	frozen := 0
	for i, p := range d.Params {
		if p.Q == nil {
			continue
		}
		frozen++
		if p.qt.Data != nil {
			t.Errorf("%s: %d host bytes of its Q8_0 copy kept", p.Name, len(p.qt.Data))
		}
		if got, want := d.Values(nil, p), ref.Values(nil, ref.Params[i]); !slices.Equal(got, want) {
			t.Errorf("%s: values read back differ from the host's copy's", p.Name)
		}
	}
	if frozen == 0 {
		t.Fatal("no matrix frozen")
	}
	// New weights into both: the device's matrices take them in place.
	other := newDraft32(t, c, 6)
	uploads := cdev.uploads
	for _, x := range []*Draft{d, ref} {
		if err := x.CopyWeights(other); err != nil {
			t.Fatal(err)
		}
	}
	if cdev.uploads != uploads {
		t.Errorf("re-freezing uploaded %d new matrices", cdev.uploads-uploads)
	}
	w := dgftest.RandWindow(rand.New(rand.NewPCG(5, 5)), 8, c.Hidden, c.Vocab, 1)
	s1, s2 := d.NewSequence(0), ref.NewSequence(0)
	lg1, _, err := s1.Forward(w.Features[:6], w.Tokens[1:7])
	if err != nil {
		t.Fatal(err)
	}
	lg2, _, err := s2.Forward(w.Features[:6], w.Tokens[1:7])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lg1, lg2) {
		t.Error("the device's frozen draft drafts otherwise than the host's")
	}
	s1.Free()
	s2.Free()
	before := len(cdev.own)
	d.Free()
	if left := len(cdev.own); left != before-frozen {
		t.Errorf("freeing the draft left %d of its %d matrices on the device", left-(before-frozen), frozen)
	}
}
