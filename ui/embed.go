package ui

import (
	"embed"
	"errors"
	"io/fs"
)

//go:embed src vendor
var files embed.FS

// Dist returns what the server serves at /ui/: the page sources of src/
// (index.html at the top) with the vendored uPlot of vendor/ beside them.
// A name is looked up in src/ first, then in vendor/.
func Dist() fs.FS {
	return layered{sub("src"), sub("vendor")}
}

func sub(dir string) fs.FS {
	s, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // both are embedded at build time: they are always there
	}
	return s
}

// layered opens a name in the first file system that has it.
type layered []fs.FS

func (l layered) Open(name string) (fs.File, error) {
	var first error
	for _, f := range l {
		file, err := f.Open(name)
		if err == nil {
			return file, nil
		}
		if first == nil || !errors.Is(err, fs.ErrNotExist) {
			first = err
		}
	}
	return nil, first
}
