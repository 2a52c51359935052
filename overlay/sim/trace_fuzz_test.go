package sim

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// fuzzReader checks a trace reader on any input: it never panics, every
// error is a *TraceError (ErrInvalidTrace), and what it accepts is written
// and read back unchanged.
func fuzzReader(t *testing.T, in []byte, read func(*bytes.Reader) (*Trace, error), write func(*bytes.Buffer, *Trace) error) {
	tr, err := read(bytes.NewReader(in))
	if err != nil {
		var te *TraceError
		if !errors.As(err, &te) || !errors.Is(err, ErrInvalidTrace) {
			t.Fatalf("%T %v is not a *TraceError", err, err)
		}
		if len(te.Error()) > 2000 {
			t.Fatalf("a %d-byte message: %.200s...", len(te.Error()), te.Error())
		}
		return
	}
	var b bytes.Buffer
	if err := write(&b, tr); err != nil {
		t.Fatal(err)
	}
	back, err := read(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("reading what was written: %v\n%s", err, b.Bytes())
	}
	for _, x := range []*Trace{tr, back} {
		for k := range x.Jobs {
			x.Jobs[k].Line = 0
		}
		for k := range x.Health {
			x.Health[k].Line = 0
		}
	}
	if !reflect.DeepEqual(tr.Jobs, back.Jobs) || !reflect.DeepEqual(tr.Health, back.Health) {
		t.Fatalf("the trace changed in a round trip:\n%+v\n%+v", tr, back)
	}
}

func FuzzReadCSV(f *testing.F) {
	for _, s := range []string{
		"submit,job,budget,class,count,gpus,work,min_runtime,resumable,priority,baseline\n0,a,x/y,debug,1,2,10m,5m,true,60,high\n",
		"submit,job,gpus,work,node,health,gpu,reason\n0,a,1,1h,,,,\n60,,,,default-0,unhealthy,3,XID 79\n",
		"submit,job,gpus,work\n0,a,1\n",
		"\uFEFFsubmit,job,gpus,work\n0,\"a,b\",1,1h\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fuzzReader(t, in, func(r *bytes.Reader) (*Trace, error) { return ReadCSV(r, ReadOptions{}) },
			func(b *bytes.Buffer, tr *Trace) error { return WriteCSV(b, tr) })
	})
}

func FuzzReadJSONL(f *testing.F) {
	for _, s := range []string{
		`{"submit":0,"job":"a","budget":"x/y","class":"train","count":2,"gpus":8,"work":"4h","min_runtime":3600,"resumable":true}` + "\n" +
			`{"at":60,"node":"default-0","health":"unhealthy","gpu":3,"reason":"XID 79"}`,
		`{"submit":0,"job":"a","gpus":1,"work":600,"extra":1}`,
		`{"submit":0,"job":"a","gpus":[1],"work":600}`,
		"{\"submit\":0}\n{",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fuzzReader(t, in, func(r *bytes.Reader) (*Trace, error) { return ReadJSONL(r, ReadOptions{}) },
			func(b *bytes.Buffer, tr *Trace) error { return WriteJSONL(b, tr) })
	})
}
