package validate

// validJSON reports whether s is exactly one JSON value (RFC 8259), white
// space around it allowed, accepting what encoding/json's json.Valid accepts:
// bytes of any value from 0x20 inside strings (UTF-8 is not checked), and
// nesting at most maxNesting deep. Unlike json.Valid it reads a string in
// place and never allocates, even to reject: the bracket search may reject
// many candidates. A differential fuzz test holds the two equal.
func validJSON(s string) bool {
	var objects [maxNesting/64 + 1]uint64 // bit d: the container at depth d is an object
	depth, i := 0, 0
	for {
		// A value starts at s[i] (after white space).
		i = skipSpace(s, i)
		if i >= len(s) {
			return false
		}
		switch c := s[i]; {
		case c == '{' || c == '[':
			if depth == maxNesting {
				return false
			}
			if c == '{' {
				objects[depth/64] |= 1 << (depth % 64)
			} else {
				objects[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			i = skipSpace(s, i+1)
			if i < len(s) && s[i] == c+2 { // '{'+2 == '}', '['+2 == ']'
				depth--
				i++
				break
			}
			if c == '{' {
				if i = member(s, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			if i = str(s, i); i < 0 {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if i = number(s, i); i < 0 {
				return false
			}
		case c == 't':
			if i = literal(s, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = literal(s, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = literal(s, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// A value ended at s[i-1]: close containers until another value is due.
		for {
			i = skipSpace(s, i)
			if depth == 0 {
				return i == len(s)
			}
			if i >= len(s) {
				return false
			}
			object := objects[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			c := s[i]
			if c == ',' {
				i++
				if object {
					if i = member(s, skipSpace(s, i)); i < 0 {
						return false
					}
				}
				break
			}
			if object && c != '}' || !object && c != ']' {
				return false
			}
			depth--
			i++
		}
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		}
		break
	}
	return i
}

// member reads `"key" :` at s[i] and returns the offset after the colon,
// or -1.
func member(s string, i int) int {
	if i >= len(s) || s[i] != '"' {
		return -1
	}
	if i = str(s, i); i < 0 {
		return -1
	}
	if i = skipSpace(s, i); i >= len(s) || s[i] != ':' {
		return -1
	}
	return i + 1
}

// str reads the string at s[i] (a quote) and returns the offset after its
// closing quote, or -1.
func str(s string, i int) int {
	for i++; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i++; i >= len(s) {
				return -1
			}
			switch s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s) {
					return -1
				}
				for _, h := range []byte(s[i+1 : i+5]) {
					if !(h >= '0' && h <= '9' || h|0x20 >= 'a' && h|0x20 <= 'f') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// number reads the number at s[i] and returns the offset after it, or -1.
func number(s string, i int) int {
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = digits(s, i)
	default:
		return -1
	}
	if i < len(s) && s[i] == '.' {
		if j := digits(s, i+1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < len(s) && s[i]|0x20 == 'e' {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if j := digits(s, i); j > i {
			i = j
		} else {
			return -1
		}
	}
	return i
}

func digits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// literal reads word at s[i] and returns the offset after it, or -1.
func literal(s string, i int, word string) int {
	if len(s)-i < len(word) || s[i:i+len(word)] != word {
		return -1
	}
	return i + len(word)
}
