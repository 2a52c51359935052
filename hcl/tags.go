package hcl

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"time"

	hcl2 "github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/allot-sched/allot/overlay/policy"
)

// Tag-driven decoding: a struct declares its keys once, in gohcl's tag
// syntax (`hcl:"lookback,optional"`, `hcl:"bands,block"`), and the decoder
// below fills it from a body. It is not gohcl.DecodeBody because the types
// it fills are the pure core's (policy.Config): they hold time.Duration
// ("90m", "7d"), policy.Range ([40, 89]) and untagged embedded structs
// (contract.Config inside policy.Config) that gohcl cannot decode, and
// absent keys and blocks keep the defaults already in the struct instead of
// being required or zeroed. Every problem is a Diagnostic at file:line:col
// that says what would be valid; unknown keys get hcl's own did-you-mean.

// tagField is one key of a tagged struct.
type tagField struct {
	key      string // the HCL key
	block    bool
	embedded bool   // an embedded struct: its fields are promoted
	index    []int  // reflect index path, through untagged embedded structs
	goName   string // the Go field's name, as policy.FieldError names it
	owner    reflect.Type
}

// tagFields lists t's keys in field order. Untagged embedded structs are
// flattened; other untagged fields are not settings of the file.
func tagFields(t reflect.Type) []tagField {
	var out []tagField
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("hcl")
		if !ok {
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				for _, sub := range tagFields(f.Type) {
					sub.index = append([]int{i}, sub.index...)
					out = append(out, sub)
				}
			}
			continue
		}
		key, kind, _ := strings.Cut(tag, ",")
		switch kind {
		case "optional", "block":
		default:
			// A programming error in a tagged type, caught by any test
			// that decodes it.
			panic(fmt.Sprintf("hcl: field %s.%s: tag %q: want \"key,optional\" or \"key,block\"", t, f.Name, tag))
		}
		out = append(out, tagField{key: key, block: kind == "block", embedded: f.Anonymous, index: []int{i}, goName: f.Name, owner: t})
	}
	return out
}

// durationWords are the words a duration key accepts besides a duration:
// drain { return = "manual" } is policy.DrainConfig's DrainReturnAfter = 0.
var durationWords = map[reflect.Type]map[string]struct {
	word  string
	value time.Duration
}{
	reflect.TypeFor[policy.DrainConfig](): {"DrainReturnAfter": {"manual", 0}},
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	rangeType    = reflect.TypeFor[policy.Range]()
	policyType   = reflect.TypeFor[policy.Config]()
)

// decodeTagged fills the struct v (addressable) from body by its tags.
// Absent keys and blocks keep what v holds. set gets where each field the
// body sets is (an attribute's value, a block's header), keyed by its
// path: prefix, the names of the named blocks on the way ("Ports."), and
// the field's Go name; an embedded block adds nothing, as its fields are
// promoted ("Pending", not "BandsConfig.Pending"). Problems found after
// decoding are reported there (decoder.report).
func (d *decoder) decodeTagged(body hcl2.Body, v reflect.Value, set map[string]hcl2.Range, prefix string) {
	fields := tagFields(v.Type())
	var attrNames, blockNames []string
	for _, f := range fields {
		if f.block {
			blockNames = append(blockNames, f.key)
		} else {
			attrNames = append(attrNames, f.key)
		}
	}
	attrs, blocks := d.content(body, attrNames, blockNames)
	for _, f := range fields {
		fv := v.FieldByIndex(f.index)
		if f.block {
			b, ok := blocks[f.key]
			if !ok {
				continue
			}
			set[prefix+f.goName] = d.blockAt[b]
			switch {
			case fv.Type() == policyType:
				// The policy {} block goes onto defaults that depend on its
				// own protected value, and is checked by
				// policy.Config.Validate: decoder.policy.
				fv.Set(reflect.ValueOf(d.policy(b)))
			case f.embedded:
				d.decodeTagged(b, fv, set, prefix)
			default:
				d.decodeTagged(b, fv, set, prefix+f.goName+".")
			}
			continue
		}
		attr := attrs[f.key]
		if attr == nil {
			continue
		}
		if d.decodeValue(attr, f, fv) {
			set[prefix+f.goName] = attr.Expr.Range()
		}
	}
}

// fieldProblem is a value that decoded but is not valid: the fields it
// concerns (decodeTagged's paths, the one to change first) and what would
// be valid.
type fieldProblem struct {
	fields  []string
	message string
}

// report adds a diagnostic per problem at the first of its fields the
// file set, or at fallback when it set none of them (a default that no
// longer fits the values given).
func (d *decoder) report(ps []fieldProblem, set map[string]hcl2.Range, fallback hcl2.Range) {
	for _, p := range ps {
		r := fallback
		for _, f := range p.fields {
			if at, ok := set[f]; ok {
				r = at
				break
			}
		}
		d.diags = append(d.diags, at(r, "%s", p.message))
	}
}

// decodeValue sets fv from attr by fv's type, or adds a diagnostic and
// leaves fv alone.
func (d *decoder) decodeValue(attr *hcl2.Attribute, f tagField, fv reflect.Value) bool {
	t := fv.Type()
	if t.Kind() == reflect.Pointer {
		p := reflect.New(t.Elem())
		if !d.decodeValue(attr, f, p.Elem()) {
			return false
		}
		fv.Set(p)
		return true
	}
	switch {
	case t == durationType:
		s := d.str(attr)
		if s == nil {
			return false
		}
		alt := ""
		if w, ok := durationWords[f.owner][f.goName]; ok {
			if *s == w.word {
				fv.SetInt(int64(w.value))
				return true
			}
			alt = fmt.Sprintf("or %q", w.word)
		}
		dur := d.parseDuration(attr, *s, alt)
		if dur == nil {
			return false
		}
		fv.SetInt(int64(*dur))
	case t == rangeType:
		r := d.intPair(attr)
		if r == nil {
			return false
		}
		fv.Set(reflect.ValueOf(policy.Range{Low: r[0], High: r[1]}))
	case t.Kind() == reflect.Int:
		n := d.whole(attr)
		if n == nil {
			return false
		}
		fv.SetInt(int64(*n))
	case t.Kind() == reflect.Float64:
		x := d.finite(attr)
		if x == nil {
			return false
		}
		fv.SetFloat(*x)
	case t.Kind() == reflect.String:
		s := d.str(attr)
		if s == nil {
			return false
		}
		fv.SetString(*s)
	case t.Kind() == reflect.Bool:
		b := d.bool(attr)
		if b == nil {
			return false
		}
		fv.SetBool(*b)
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		l := d.strList(attr)
		if l == nil {
			return false
		}
		fv.Set(reflect.ValueOf(l))
	default:
		panic(fmt.Sprintf("hcl: field %s.%s: no decoding for type %s", f.owner, f.goName, t))
	}
	return true
}

// whole is attr as a whole number that fits a Nomad priority's int32; the
// type's Validate says which are valid.
func (d *decoder) whole(attr *hcl2.Attribute) *int {
	f, ok := d.number(attr)
	if !ok {
		return nil
	}
	i, acc := f.Int64()
	if acc != big.Exact || i < math.MinInt32 || i > math.MaxInt32 {
		d.bad(attr, "%s = %s: want a whole number", attr.Name, f.Text('g', 10))
		return nil
	}
	n := int(i)
	return &n
}

// finite is attr as a finite number; the type's Validate says which are
// valid.
func (d *decoder) finite(attr *hcl2.Attribute) *float64 {
	f, ok := d.number(attr)
	if !ok {
		return nil
	}
	x, _ := f.Float64()
	if math.IsInf(x, 0) {
		d.bad(attr, "%s = %s: want a finite number", attr.Name, f.Text('g', 10))
		return nil
	}
	return &x
}

// intPair is attr as [low, high], two whole numbers; the type's Validate
// says which ranges are valid.
func (d *decoder) intPair(attr *hcl2.Attribute) *[2]int {
	v, ok := d.value(attr)
	if !ok {
		return nil
	}
	want := fmt.Sprintf("%s: want [low, high], two whole numbers, e.g. [40, 89]", attr.Name)
	if (!v.Type().IsTupleType() && !v.Type().IsListType()) || v.LengthInt() != 2 {
		d.bad(attr, "%s", want)
		return nil
	}
	var r [2]int
	for i, it := 0, v.ElementIterator(); it.Next(); i++ {
		_, e := it.Element()
		if e.IsNull() || e.Type() != cty.Number {
			d.bad(attr, "%s", want)
			return nil
		}
		n, acc := e.AsBigFloat().Int64()
		if acc != big.Exact || n < math.MinInt32 || n > math.MaxInt32 {
			d.bad(attr, "%s", want)
			return nil
		}
		r[i] = int(n)
	}
	return &r
}
