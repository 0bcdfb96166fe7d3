package pending

import (
	"slices"
	"strings"
	"testing"
)

// A tree added in two calls gives each node its position, mask row and
// root-down path; a commit of a chain moves exactly the nodes out of
// place, in an order that never overwrites one still to move.
func TestTree(t *testing.T) {
	var tr Tree
	//     0       4
	//   1   2     |
	//   3         5
	pos := tr.Add([]int{-1, 0, 0}, 10, nil)
	if err := tr.Check([]int{1, -1, 4}); err != nil {
		t.Fatal(err)
	}
	pos = tr.Add([]int{1, -1, 4}, 10, pos)
	if want := []int{10, 11, 11, 12, 10, 11}; !slices.Equal(pos, want) {
		t.Fatalf("positions %v, want %v", pos, want)
	}
	m := tr.Len()
	mask := make([]uint8, 3*m)
	for i := range mask {
		mask[i] = 7 // MaskRows clears what it writes
	}
	tr.MaskRows(mask, 3)
	want := []uint8{
		1, 1, 0, 1, 0, 0, // 3: 0, 1, itself
		0, 0, 0, 0, 1, 0, // 4
		0, 0, 0, 0, 1, 1, // 5: 4, itself
	}
	if !slices.Equal(mask, want) {
		t.Fatalf("mask rows %v, want %v", mask, want)
	}
	if got := tr.Path([]int{99}, 3, 100); !slices.Equal(got, []int{99, 100, 101, 103}) {
		t.Errorf("path of node 3: %v", got)
	}
	if got := tr.Path(nil, -1, 100); len(got) != 0 {
		t.Errorf("path of the committed positions: %v", got)
	}
	var moves [][2]int
	if err := tr.Commit([]int{0, 1, 3}, func(to, from int) { moves = append(moves, [2]int{to, from}) }); err != nil {
		t.Fatal(err)
	}
	if want := [][2]int{{2, 3}}; !slices.Equal(moves, want) {
		t.Errorf("moves %v, want %v", moves, want)
	}
	if tr.Len() != 0 {
		t.Errorf("%d nodes pending after the commit", tr.Len())
	}
}

// Parents that are not earlier nodes and paths that are not chains are
// refused, and a refused commit leaves the tree as it was.
func TestTreeErrors(t *testing.T) {
	var tr Tree
	for _, parents := range [][]int{{0}, {-2}, {-1, 1}} {
		if err := tr.Check(parents); err == nil || !strings.Contains(err.Error(), "earlier node") {
			t.Errorf("parents %v: %v", parents, err)
		}
	}
	tr.Add([]int{-1, 0, -1}, 0, nil)
	for _, path := range [][]int{{1}, {0, 2}, {3}, {-1}} {
		if err := tr.Commit(path, func(int, int) { t.Fatal("moved a node of a refused path") }); err == nil {
			t.Errorf("path %v committed", path)
		}
	}
	if tr.Len() != 3 {
		t.Errorf("%d nodes pending after refused commits, want 3", tr.Len())
	}
}
