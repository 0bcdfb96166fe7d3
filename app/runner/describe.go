package runner

import (
	"fmt"
	"os"
	"time"

	"dovetail/models"
	"dovetail/models/draft"
)

// Description is what a model file says of itself, read from its header
// without loading it: what a model list shows.
type Description struct {
	Arch          string
	Name          string // general.name, when the file has one
	Params        uint64
	Quantization  string // the type of most of the weights' bytes
	FileType      string // general.file_type by llama.cpp's name ("Q4_K_M"; "": none)
	ContextLength int
	Hidden        int
	Layers        int
	Heads         int
	KVHeads       int
	FFN           int
	Vocab         int
	Size          int64
	Modified      time.Time
	Fingerprint   string
	ChatTemplate  string
	License       string
}

// Describe reads a GGUF file's header ("": the embedded model).
func Describe(path string) (Description, error) {
	f, err := OpenGGUF(path)
	if err != nil {
		return Description{}, err
	}
	defer f.Close()
	d := Description{Params: models.Params(f), Fingerprint: draft.Fingerprint(f)}
	d.Arch, _ = f.String("general.architecture")
	d.Name, _ = f.String("general.name")
	d.License, _ = f.String("general.license")
	d.ChatTemplate, _ = f.String("tokenizer.chat_template")
	d.FileType = fileType(f)
	if c, err := models.ConfigFromGGUF(f); err == nil {
		d.ContextLength, d.Hidden, d.Layers, d.Heads, d.KVHeads, d.FFN, d.Vocab = c.ContextLength, c.Hidden, c.Layers, c.Heads, c.KVHeads, c.FFN, c.Vocab
	}
	bytes := map[string]uint64{}
	for _, t := range f.Tensors {
		if len(t.Dims) >= 2 {
			bytes[t.Type.String()] += t.Size
		}
	}
	var most uint64
	for typ, n := range bytes {
		if n > most || n == most && typ < d.Quantization {
			d.Quantization, most = typ, n
		}
	}
	if path != "" {
		if st, err := os.Stat(path); err == nil {
			d.Size, d.Modified = st.Size(), st.ModTime()
		}
	}
	return d, nil
}

// ParamSize writes a parameter count as model lists do: 1.1B, 260K.
func ParamSize(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
