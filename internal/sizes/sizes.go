// Package sizes writes byte counts as people read them, one way for
// every front end and the packages below them.
package sizes

import (
	"fmt"
	"math"
)

// Bytes writes a size in binary units: 591.2 MiB; one too large to count
// (a saturated sum) as more than 16 EiB.
func Bytes(n uint64) string {
	const unit = 1024
	if n == math.MaxUint64 {
		return "more than 16 EiB"
	}
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
