package mail

import "strings"

// Unflow reads text/plain; format=flowed (RFC 3676) as the writer meant
// it: a line that ends in a space goes on in the next line of the same
// quote depth (§4.2), so a paragraph a client wrapped at 72 columns is one
// line again; with delSp (delsp=yes) that space was the wrapper's and is
// dropped (§4.3). A space a line starts with after its quote marks was
// stuffed and goes (§4.4); "-- " stays the signature separator (§4.3).
// Quoted lines come back with their marks and one space ("> > text").
// Thunderbird and Apple Mail write their plain text so.
func Unflow(text string, delSp bool) string {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	var (
		out       strings.Builder
		para      strings.Builder
		paraDepth = -1 // the quote depth of the paragraph being joined; -1: none
	)
	end := func() {
		if paraDepth < 0 {
			return
		}
		if paraDepth > 0 {
			out.WriteString(strings.Repeat(">", paraDepth) + " ")
		}
		out.WriteString(para.String())
		out.WriteByte('\n')
		para.Reset()
		paraDepth = -1
	}
	for _, line := range lines {
		depth := 0
		for depth < len(line) && line[depth] == '>' {
			depth++
		}
		content := strings.TrimPrefix(line[depth:], " ")
		if paraDepth >= 0 && depth != paraDepth {
			end() // a flowed line before a change of depth ends its paragraph (§4.5)
		}
		flowed := strings.HasSuffix(content, " ") && content != "-- "
		if flowed && delSp {
			content = content[:len(content)-1]
		}
		para.WriteString(content)
		paraDepth = depth
		if !flowed {
			end()
		}
	}
	end()
	return strings.TrimSuffix(out.String(), "\n")
}
