package discover

import (
	"dovetail/models/draft"
	"dovetail/models/gguf"
)

// notAModel says why a GGUF file is not a model to serve ("" when it is
// one, or when its header does not read: loading it will say what is
// wrong). Dovetail's own draft checkpoints, LoRA adapters and vision
// projectors are GGUF files beside the models, but nothing a request can
// run on its own.
func notAModel(path string) string {
	f, err := gguf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	arch, _ := f.String("general.architecture")
	typ, _ := f.String("general.type")
	switch {
	case arch == draft.Arch:
		return "a Dovetail draft checkpoint (it drafts for a target: --draft dgf:FILE)"
	case typ == "adapter":
		return "a LoRA adapter"
	case typ == "mmproj" || arch == "clip":
		return "a vision projector"
	}
	return ""
}
