package cmdutil

import "strings"

// LongDesc normalizes the long description of a command written as an indented raw
// string: it drops the leading and trailing blank lines and the indentation common to
// every line, like kubectl's templates.LongDesc (without its Markdown rendering).
func LongDesc(s string) string {
	return dedent(s)
}

// Examples normalizes the examples of a command like LongDesc and indents every line by
// two spaces, like kubectl's templates.Examples.
func Examples(s string) string {
	lines := strings.Split(dedent(s), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n")
}

func dedent(s string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			lines[i] = ""
			continue
		}
		lines[i] = strings.TrimRight(l[indent:], " \t")
	}
	return strings.Join(lines, "\n")
}
