// Package config owns allot-nvml's plugin configuration: the hclspec schema sent
// to Nomad (with every default), and the decoding and validation of the msgpack
// config Nomad sends back in SetConfig. It does no I/O.
package config
