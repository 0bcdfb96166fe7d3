package runner

import (
	"testing"

	"dovetail/device"
	"dovetail/dgf"
)

// gpuStream is a device that is not the host, two of which may share
// memory, as two streams of one GPU do.
type gpuStream struct {
	device.Device
	gpu int
}

func (g *gpuStream) SharesMemory(o device.Device) bool {
	s, ok := o.(*gpuStream)
	return ok && s.gpu == g.gpu
}

// The target's layers use the draft's LM head where the draft is on the
// same GPU, and only there.
func TestDraftHeadSharedOnItsGPU(t *testing.T) {
	host := device.NewHost(1)
	head := &struct{ device.Matrix }{}
	drafter, sameGPU, otherGPU := &gpuStream{Device: host}, &gpuStream{Device: host}, &gpuStream{Device: host, gpu: 1}
	var none *drafting
	if none.sharedHead(sameGPU) != nil {
		t.Error("no drafting: a head shared")
	}
	d := &drafting{}
	d.keepHead(&dgf.Draft{Dev: host, Head: head})
	if d.sharedHead(host) != nil {
		t.Error("a draft on the CPU shares its head")
	}
	d.keepHead(&dgf.Draft{Dev: drafter}) // an EAGLE-3 draft: a head of its own
	if d.sharedHead(drafter) != nil {
		t.Error("a draft without the target's head shares one")
	}
	d.keepHead(&dgf.Draft{Dev: drafter, Head: head})
	if d.sharedHead(sameGPU) != head || d.sharedHead(drafter) != head {
		t.Error("the draft's head not shared on its GPU")
	}
	if d.sharedHead(otherGPU) != nil || d.sharedHead(host) != nil {
		t.Error("the draft's head shared with another device")
	}
}
