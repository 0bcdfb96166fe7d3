package probe

// MemoryBandwidth is the peak bandwidth, bytes/s, of a GPU's memory whose
// clock the driver gives as clockKHz and its bus as busBits wide
// (CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE and _GLOBAL_MEMORY_BUS_WIDTH):
// two transfers a clock across the bus (the driver's clock is half the
// data rate: 7,751 MHz for an RTX 2080 SUPER's 15.5 Gb/s a pin). 0 where
// either is unknown.
func MemoryBandwidth(clockKHz, busBits int) float64 {
	if clockKHz <= 0 || busBits <= 0 {
		return 0
	}
	return 2 * float64(clockKHz) * 1e3 * float64(busBits) / 8
}
