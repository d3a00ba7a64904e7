package race

// Set marks targets by index, those a call sent a rival: the first 64 in
// a word that lives where the Set does, any beyond in words only a chain
// that long allocates. The zero value is empty.
type Set struct {
	lo uint64
	hi []uint64
}

// Has reports whether i is marked.
func (s *Set) Has(i int) bool {
	if i < 64 {
		return s.lo&(1<<i) != 0
	}
	j := i/64 - 1
	return j < len(s.hi) && s.hi[j]&(1<<(i%64)) != 0
}

// Add marks i.
func (s *Set) Add(i int) {
	if i < 64 {
		s.lo |= 1 << i
		return
	}
	j := i/64 - 1
	for len(s.hi) <= j {
		s.hi = append(s.hi, 0)
	}
	s.hi[j] |= 1 << (i % 64)
}
