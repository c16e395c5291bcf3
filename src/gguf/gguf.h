// GGUF reader (versions 2 and 3) and writer.
//
// File layout (little-endian):
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv × { string key | u32 value_type | value }
//   n_tensors × { string name | u32 n_dims | n_dims × u64 ne | u32 ggml_type | u64 offset }
//   padding to general.alignment (default 32)
//   tensor data; each tensor at data_start + offset (offset is a multiple of alignment)
// string = u64 length + bytes (no terminator). array = u32 elem_type | u64 n | values.
//
// Every read is bounds-checked: a truncated or corrupt file throws pc::Error whose
// message names what was being read and the byte offset, never reads out of bounds.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "gguf/types.h"

namespace pc {

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

// A metadata value. Scalars are held widened (integers in i/u, floats in f);
// arrays hold their elements (possibly arrays themselves).
struct GgufValue {
  GgufType type = GgufType::UINT8;
  GgufType elem_type = GgufType::UINT8;  // for ARRAY: the declared element type
  int64_t i = 0;         // signed integer types and BOOL
  uint64_t u = 0;        // unsigned integer types (also mirrored into i when it fits)
  double f = 0;          // FLOAT32 / FLOAT64
  std::string s;         // STRING
  std::vector<GgufValue> arr;  // ARRAY

  bool is_integer() const;
  bool is_float() const { return type == GgufType::FLOAT32 || type == GgufType::FLOAT64; }
  // Human-readable rendering (arrays abbreviated after `max_elems`).
  std::string to_string(size_t max_elems = 8) const;

  // Constructors for each kind of value. make_uint/make_int take the exact integer
  // type (UINT8..INT64); values are stored widened as described above.
  static GgufValue make_uint(GgufType t, uint64_t v);
  static GgufValue make_int(GgufType t, int64_t v);
  static GgufValue make_float(GgufType t, double v);  // FLOAT32 or FLOAT64
  static GgufValue make_bool(bool v);
  static GgufValue make_string(std::string v);
  // Elements should have type `elem` (for elem == ARRAY: arrays, each with its own
  // elem_type). The writer encodes each element as `elem`.
  static GgufValue make_array(GgufType elem, std::vector<GgufValue> elems);
};

// Name of a metadata value type ("UINT32"); "type#N" for unknown ids.
std::string gguf_type_name(GgufType t);

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] is the innermost (row) dimension, as in ggml
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;      // relative to the data section
  const uint8_t* data = nullptr;  // points into the mapped file
  uint64_t nbytes = 0;
  int64_t n_elements() const;
};

// Where an opened file's bytes live.
enum class Residency {
  // Memory-mapped from the file: loads lazily, shared with other processes
  // through the page cache, nothing copied.
  kMap,
  // Read into anonymous memory advised for transparent huge pages: decode
  // streams every weight per token, and with 2 MiB pages (no TLB miss every
  // 4 KiB) it ran 1.15-1.25x faster on the machines measured. Falls back to
  // kMap when the file is larger than half the available memory or the copy
  // cannot be made.
  kMemory,
};

class GgufFile {
 public:
  // Memory-maps (or copies, see Residency) and parses the file. Throws
  // pc::Error naming the path, what was wrong and where (byte offset).
  // A copy is read by copy_threads threads (at most 8; Model::load gives its
  // compute thread count): each page's fault, zeroing and copy run where it is
  // read.
  static std::unique_ptr<GgufFile> open(const std::string& path, Residency r = Residency::kMap,
                                        int copy_threads = 1);
  // Parses an in-memory copy (tests, fuzzing). The bytes are owned by the object.
  static std::unique_ptr<GgufFile> from_bytes(std::vector<uint8_t> bytes,
                                              const std::string& name = "<memory>");
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }
  // kMemory when the bytes were copied into memory, kMap when mapped (also
  // when kMemory was asked for and fell back).
  Residency residency() const { return residency_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters. Missing key → `def`. Present with the wrong type → pc::Error.
  std::string get_string(std::string_view key, const std::string& def = "") const;
  int64_t get_int(std::string_view key, int64_t def) const;   // any integer type
  double get_float(std::string_view key, double def) const;   // float or integer
  bool get_bool(std::string_view key, bool def) const;
  std::vector<std::string> get_string_array(std::string_view key) const;  // missing → {}
  std::vector<float> get_float_array(std::string_view key) const;          // missing → {}
  std::vector<int64_t> get_int_array(std::string_view key) const;          // missing → {}

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* tensor(std::string_view name) const;  // nullptr if absent

  // Gives the memory of the whole pages inside tensor t's bytes back to the
  // system (a model that keeps the tensor in another layout). Afterwards
  // t.data must not be read: its pages read as zeros (kMemory) or from the
  // file again (kMap). No effect on files parsed from bytes.
  void release_tensor_bytes(const GgufTensorInfo& t);

  // kMemory: the first byte of the copy of the file, writable (for a model
  // rewriting tensors in place, in a layout of the same size); the tensors'
  // data pointers stay valid. nullptr for a mapped file or one parsed from
  // bytes, whose bytes are read-only.
  uint8_t* rewritable_bytes();

 private:
  GgufFile() = default;
  void parse();

  Residency residency_ = Residency::kMap;
  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* map_ = nullptr;            // mmap region (nullptr for from_bytes)
  uint64_t map_bytes_ = 0;         // its length (a copy: the file and the bytes before it)
  std::vector<uint8_t> owned_;     // from_bytes storage
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensorInfo> tensors_;
};

// Builds a GGUF v3 file in memory and writes it atomically (temp file + rename).
class GgufWriter {
 public:
  void set(const std::string& key, GgufValue v);  // replaces an existing key
  void set_string(const std::string& key, const std::string& v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_u64(const std::string& key, uint64_t v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  const GgufValue* find(std::string_view key) const;  // nullptr if not set
  // `data` holds ggml_row_bytes(type, ne[0]) * (product of the other ne) bytes.
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                  std::vector<uint8_t> data);
  std::vector<uint8_t> to_bytes() const;
  void write(const std::string& path) const;  // throws pc::Error on I/O failure

 private:
  struct T { std::string name; GgmlType type; std::vector<int64_t> ne; std::vector<uint8_t> data; };
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<T> tensors_;
};

}  // namespace pc
