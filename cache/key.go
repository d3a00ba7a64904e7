package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Key derives a store key from parts, such as a chain's name followed by the
// role and content of each of the caller's messages. It returns the SHA-256
// of the parts, each preceded by its length in bytes as 8 bytes big-endian,
// in lowercase hex (64 characters).
//
// Because each part is length-prefixed, distinct lists of parts give
// distinct inputs to the hash: ("ab", "c"), ("a", "bc"), ("abc") and
// ("abc", "") all differ. The format is stable: the same parts give the same
// key in every process and version, so keys can be shared through a store
// such as Redis. A store may add its own prefix (a namespace) to the key.
//
// Key allocates only the returned string, whatever the size of the parts.
func Key(parts ...string) string {
	h := sha256.New()
	// The parts are hashed through a fixed buffer: writing each string to
	// the hash directly would copy it to the heap.
	var buf [512]byte
	b := buf[:0] // pending bytes; at most len(buf)-8 between parts
	for _, p := range parts {
		b = binary.BigEndian.AppendUint64(b, uint64(len(p)))
		for len(p) > 0 {
			if len(b) == len(buf) {
				h.Write(b)
				b = buf[:0]
			}
			n := copy(buf[len(b):], p)
			b, p = buf[:len(b)+n], p[n:]
		}
		if len(b) > len(buf)-8 {
			h.Write(b)
			b = buf[:0]
		}
	}
	h.Write(b)
	var sum [sha256.Size]byte
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], h.Sum(sum[:0]))
	return string(out[:])
}
