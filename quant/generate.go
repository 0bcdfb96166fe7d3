package quant

// iqgrids.go and the kernels' cpu/kernels/c/iq_grids.c are printed from
// the one copy of ggml's i-quant tables, internal/iqgrids/tables.txt.
//go:generate go run ../internal/iqgrids
