package fake

import (
	"encoding/binary"
	"hash/crc32"
)

// The AWS event-stream framing (application/vnd.amazon.eventstream), as
// aws-sdk-go-v2's aws/protocol/eventstream encodes it (v1.7.27, encode.go,
// header_value.go):
//
//	total length     uint32, big-endian: the whole message, CRCs included
//	headers length   uint32, big-endian
//	prelude CRC      CRC-32 (IEEE) of the 8 bytes above
//	headers          each: name length (uint8), name, value type (uint8), value
//	payload          the rest
//	message CRC      CRC-32 (IEEE) of everything before it, prelude CRC included
//
// The fake writes string header values only (type 7: uint16 big-endian
// length, then the bytes), which is all Bedrock's stream uses.

// esStringType is the event-stream header value type of a string.
const esStringType = 7

// esHeader is one event-stream header with a string value.
type esHeader struct{ name, value string }

// esMessage encodes one event-stream message. Header names must be at most
// 255 bytes and values at most 65535; the fake's are fixed and short.
func esMessage(headers []esHeader, payload []byte) []byte {
	var hb []byte
	for _, h := range headers {
		hb = append(hb, byte(len(h.name)))
		hb = append(hb, h.name...)
		hb = append(hb, esStringType)
		hb = binary.BigEndian.AppendUint16(hb, uint16(len(h.value)))
		hb = append(hb, h.value...)
	}
	total := 4 + 4 + 4 + len(hb) + len(payload) + 4
	b := make([]byte, 0, total)
	b = binary.BigEndian.AppendUint32(b, uint32(total))
	b = binary.BigEndian.AppendUint32(b, uint32(len(hb)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(b, hb...)
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}
