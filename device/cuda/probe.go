package cuda

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	"dovetail/device"
)

// Info describes one CUDA GPU as the driver sees it.
type Info struct {
	Ordinal                    int
	Name                       string
	ComputeMajor, ComputeMinor int
	TotalBytes, FreeBytes      uint64
	PCIBusID                   string // domain:bus:device.function, as sysfs names it
	// Measured with Probe(true): pinned host↔device copies of 64 MiB,
	// and the latency of a copy of 4 bytes, each the median of several.
	H2DGBs, D2HGBs float64
	Latency        time.Duration
	// MemoryClockKHz and MemoryBusBits are the memory's peak clock and
	// the width of its bus, as the driver reports them: what the card's
	// memory bandwidth is reckoned from (0 where the driver said nothing).
	MemoryClockKHz, MemoryBusBits int
}

// The driver's device attributes (CUdevice_attribute).
const (
	attrMemoryClockRate = 36 // kHz
	attrMemoryBusWidth  = 37 // bits
	attrComputeMajor    = 75
	attrComputeMinor    = 76
)

// Probe lists the GPUs the driver sees, with the driver's version
// (1000·major + 10·minor). Without a driver or a GPU the error wraps
// ErrNoDevice. measure also times copies between host and device.
func Probe(measure bool) (driverVersion int, gpus []Info, err error) {
	l, err := driver(DriverPath())
	if err != nil {
		return 0, nil, err
	}
	var v int32
	l.call(l.driverGetVersion, uintptr(unsafe.Pointer(&v)))
	var count int32
	if err := l.check("cuDeviceGetCount", l.call(l.deviceGetCount, uintptr(unsafe.Pointer(&count)))); err != nil {
		return int(v), nil, fmt.Errorf("%w: %v", ErrNoDevice, err)
	}
	if count == 0 {
		return int(v), nil, fmt.Errorf("%w: the driver sees no GPU", ErrNoDevice)
	}
	for i := range int(count) {
		info, err := probeDevice(l, i, measure)
		if err != nil {
			return int(v), gpus, err
		}
		gpus = append(gpus, info)
	}
	return int(v), gpus, nil
}

func probeDevice(l *cuLib, ordinal int, measure bool) (Info, error) {
	info := Info{Ordinal: ordinal}
	var dev int32
	if err := l.check("cuDeviceGet", l.call(l.deviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(ordinal))); err != nil {
		return info, err
	}
	name := make([]byte, 256)
	l.call(l.deviceGetName, uintptr(unsafe.Pointer(&name[0])), 256, uintptr(dev))
	info.Name = goString(&name[0])
	var major, minor int32
	l.call(l.deviceGetAttribute, uintptr(unsafe.Pointer(&major)), attrComputeMajor, uintptr(dev))
	l.call(l.deviceGetAttribute, uintptr(unsafe.Pointer(&minor)), attrComputeMinor, uintptr(dev))
	info.ComputeMajor, info.ComputeMinor = int(major), int(minor)
	var clock, width int32
	if l.call(l.deviceGetAttribute, uintptr(unsafe.Pointer(&clock)), attrMemoryClockRate, uintptr(dev)) == 0 &&
		l.call(l.deviceGetAttribute, uintptr(unsafe.Pointer(&width)), attrMemoryBusWidth, uintptr(dev)) == 0 {
		info.MemoryClockKHz, info.MemoryBusBits = int(clock), int(width)
	}
	bus := make([]byte, 64)
	if l.call(l.deviceGetPCIBusId, uintptr(unsafe.Pointer(&bus[0])), 64, uintptr(dev)) == 0 {
		info.PCIBusID = goString(&bus[0])
	}
	var total uint64
	l.call(l.deviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(dev))
	info.TotalBytes = total
	d, err := Open(ordinal)
	if err != nil {
		return info, err
	}
	defer d.Close()
	info.FreeBytes, _ = d.MemInfo()
	if measure {
		cd := d.(*cudaDev)
		info.H2DGBs, info.D2HGBs, info.Latency, err = cd.measureCopies()
	}
	return info, err
}

// measureCopies times pinned copies of 64 MiB each way and of 4 bytes
// host to device (the latency a round's small upload pays).
func (d *cudaDev) measureCopies() (h2d, d2h float64, latency time.Duration, err error) {
	defer device.Catch(&err)
	const size = 64 << 20
	d.enter()
	defer d.leave()
	var host unsafe.Pointer
	if err := d.l.check("cuMemAllocHost", d.l.call(d.l.memAllocHost, uintptr(unsafe.Pointer(&host)), size)); err != nil {
		return 0, 0, 0, err
	}
	defer d.l.call(d.l.memFreeHost, uintptr(host))
	dev := d.alloc(size)
	defer d.l.call(d.l.memFree, uintptr(dev))
	median := func(reps int, f func()) time.Duration {
		var ts []time.Duration
		for range reps {
			t0 := time.Now()
			f()
			d.sync()
			ts = append(ts, time.Since(t0))
		}
		slices.Sort(ts)
		return ts[len(ts)/2]
	}
	up := func(n int) func() {
		return func() {
			d.l.must("cuMemcpyHtoDAsync", d.l.call(d.l.memcpyHtoD, uintptr(dev), uintptr(host), uintptr(n), d.stream))
		}
	}
	down := func() {
		d.l.must("cuMemcpyDtoHAsync", d.l.call(d.l.memcpyDtoH, uintptr(host), uintptr(dev), size, d.stream))
	}
	median(1, up(size)) // warm up
	h2d = size / median(5, up(size)).Seconds() / 1e9
	d2h = size / median(5, down).Seconds() / 1e9
	latency = median(51, up(4))
	return h2d, d2h, latency, nil
}
