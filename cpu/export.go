package cpu

import "fmt"

// ExportLayers makes ForwardFeatures and Extend hand out, as each token's
// feature row, the residual stream before layers[0], layers[1] and
// layers[2] side by side (3·Hidden wide, un-normed): what an EAGLE-3 draft
// fuses (vLLM's convention: the state before layer i is layer i−1's
// output). Hidden still hands out the final normed state. Layers must lie
// in [0, Layers) in order; one may repeat (a model of few layers has no
// three distinct ones to give). A layer the offloaded device runs cannot be
// read here, but for the first: its input is what the CPU hands over.
func (t *Target) ExportLayers(layers [3]int) error {
	L := t.f.M.Config.Layers
	for _, l := range layers {
		if l < 0 || l >= L {
			return fmt.Errorf("EAGLE-3 feature layer %d: the model has layers 0 to %d", l, L-1)
		}
	}
	if layers[0] > layers[1] || layers[1] > layers[2] {
		return fmt.Errorf("EAGLE-3 feature layers %v: want them in increasing order", layers)
	}
	if last := layers[2]; t.f.off != nil && last > t.f.off.From {
		return fmt.Errorf("EAGLE-3 feature layer %d runs on the GPU (layers from %d are offloaded): only layers up to %d can be read", last, t.f.off.From, t.f.off.From)
	}
	t.s.aux = layers[:]
	// Rows of the old width must not be handed out again.
	t.treeLogits, t.treeHidden = nil, nil
	return nil
}

// featureRows are the feature rows of the last pass and their width: the
// exported layers' where ExportLayers was called, else the final hidden
// states.
func (t *Target) featureRows() ([]float32, int) {
	if t.s.aux != nil {
		return t.s.feat, 3 * t.f.M.Config.Hidden
	}
	return t.s.hidden, t.f.M.Config.Hidden
}

// capture copies the pass's n rows of x, the residual stream before layer
// l, into the columns of each exported layer that is l. Without
// ExportLayers it does nothing.
func (s *Seq) capture(l, n int, x []float32) {
	H := s.f.M.Config.Hidden
	for j, a := range s.aux {
		if a != l {
			continue
		}
		if len(s.feat) < s.rows*3*H {
			s.feat = make([]float32, s.rows*3*H)
		}
		for i := range n {
			copy(s.feat[i*3*H+j*H:i*3*H+(j+1)*H], x[i*H:(i+1)*H])
		}
	}
}
