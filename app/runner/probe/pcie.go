package probe

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// link is a PCIe link's generation and width, now and at most.
type link struct{ gen, width, maxGen, maxWidth int }

// readLink reads a PCI device's link from sysfs under root
// (sys/bus/pci/devices/<bus id>/current_link_speed and friends). The
// driver names the bus "0000:01:00.0"; sysfs in lower case. Zero where
// sysfs says nothing.
func readLink(root, busID string) link {
	if busID == "" {
		return link{}
	}
	dir := filepath.Join(root, "sys/bus/pci/devices", strings.ToLower(busID))
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	width := func(s string) int { n, _ := strconv.Atoi(strings.TrimPrefix(s, "x")); return n }
	return link{gen: pcieGen(read("current_link_speed")), width: width(read("current_link_width")),
		maxGen: pcieGen(read("max_link_speed")), maxWidth: width(read("max_link_width"))}
}

// pcieGen reads a link speed as sysfs writes it ("16.0 GT/s PCIe", "8 GT/s")
// as a PCIe generation.
func pcieGen(speed string) int {
	f := strings.Fields(speed)
	if len(f) == 0 {
		return 0
	}
	gts, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	for gen, rate := range []float64{2.5, 5, 8, 16, 32, 64, 128} {
		if gts <= rate+0.1 {
			return gen + 1
		}
	}
	return 0
}
