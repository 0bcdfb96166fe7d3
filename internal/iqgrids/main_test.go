package main

import (
	"strings"
	"testing"
)

// TestGenerated fails when quant/iqgrids.go or cpu/kernels/c/iq_grids.c
// is not what the generator prints from tables.txt: edited by hand, or
// tables.txt changed without go generate ./quant.
func TestGenerated(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	if s := stale(root, files); len(s) > 0 {
		t.Errorf("out of date: %s; run go generate ./quant", strings.Join(s, ", "))
	}
}

// TestParse checks that a table whose values do not match its line is
// refused.
func TestParse(t *testing.T) {
	for name, src := range map[string]string{
		"short":       "table iq3s_grid uint32 3\n1 2\n",
		"long":        "table iq3s_grid uint32 1\n1 2\n",
		"too wide":    "table kmask_iq2xs uint8 1\n256\n",
		"bad type":    "table kmask_iq2xs int8 1\n1\n",
		"unknown":     "table iq9_grid uint8 1\n1\n",
		"no table":    "1 2 3\n",
		"bad literal": "table kmask_iq2xs uint8 1\n0xzz\n",
	} {
		if _, err := parse(src); err == nil {
			t.Errorf("%s: parsed without an error", name)
		}
	}
	tabs, err := parse(source)
	if err != nil {
		t.Fatal(err)
	}
	if len(tabs) != len(outputs) {
		t.Errorf("tables.txt has %d tables, the generator knows %d", len(tabs), len(outputs))
	}
}
