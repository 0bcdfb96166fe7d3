package eagle

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// IsCheckpoint says whether dir looks like an EAGLE draft: a config.json,
// safetensors weights, and EAGLE's fc tensor among them (a plain model
// directory has none). It does not check the draft: Load says what is
// wrong with one that looks like EAGLE.
func IsCheckpoint(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil || !json.Valid(b) {
		return false
	}
	d, err := openWeights(dir, false)
	if err != nil {
		return false
	}
	defer d.Close()
	names, err := normalize(d.Tensors)
	return err == nil && names["fc.weight"] != nil
}
