// Package mapfile maps a file read-only into memory, so that a model's
// tensors are read where they lie: only the pages touched are resident,
// and the OS may drop them again. Where mmap is not available the file is
// read whole.
package mapfile

// Mapped reports whether Map's bytes are a file mapping (unix): memory the
// OS reads back from the file, which Evict may drop.
const Mapped = mapped
