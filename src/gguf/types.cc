// Block geometry of the ggml tensor types (see types.h).
#include "gguf/types.h"

namespace pc {

namespace {

// One row of the table: on-disk id, name, elements per block, bytes per block.
struct TypeInfo {
  uint32_t id;
  const char* name;
  int64_t block_elems;
  int64_t block_bytes;
};

// Every type ggml has defined that we can at least size. Types we cannot compute with
// (Q2_K, Q3_K, most I-quants, ...) are still listed so the reader can validate their data
// ranges; the model loader decides whether it supports them.
constexpr TypeInfo kTypes[] = {
    {0, "F32", 1, 4},        {1, "F16", 1, 2},
    {2, "Q4_0", 32, 18},     {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},     {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},   {11, "Q3_K", 256, 110},
    {12, "Q4_K", 256, 144},  {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},
    {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},  {21, "IQ3_S", 256, 114},
    {22, "IQ2_S", 256, 82},  {23, "IQ4_XS", 256, 136},
    {24, "I8", 1, 1},        {25, "I16", 1, 2},
    {26, "I32", 1, 4},       {27, "I64", 1, 8},
    {28, "F64", 1, 8},       {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},      {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},  {39, "MXFP4", 32, 17},
    {0x10000 + 12, "Q4_K_X16", 256, 144}, {0x10000 + 13, "Q5_K_X16", 256, 176},
    {0x10000 + 14, "Q6_K_X16", 256, 210}, {0x10000 + 8, "Q8_0_X16", 32, 34},
    {0x10000 + 2, "Q4_0_X16", 32, 18},    {0x10000 + 6, "Q5_0_X16", 32, 22},
    {0x10000 + 3, "Q4_1_X16", 32, 20},    {0x10000 + 7, "Q5_1_X16", 32, 24},
    {0x10000 + 20, "IQ4_NL_X16", 32, 18}, {0x10000 + 23, "IQ4_XS_X16", 256, 136},
    {0x10000 + 39, "MXFP4_X16", 32, 17},
};

const TypeInfo* find_type(GgmlType t) {
  for (const TypeInfo& info : kTypes)
    if (info.id == static_cast<uint32_t>(t)) return &info;
  return nullptr;
}

}  // namespace

std::string ggml_type_name(GgmlType t) {
  if (const TypeInfo* info = find_type(t)) return info->name;
  return "type#" + std::to_string(static_cast<uint32_t>(t));
}

// The weight types the engine computes with, in the order error messages list them.
constexpr GgmlType kSupported[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,   GgmlType::Q4_0,
    GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::MXFP4,
    GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS,
};

bool ggml_type_supported(GgmlType t) {
  for (GgmlType s : kSupported)
    if (s == t) return true;
  return false;
}

std::string ggml_supported_type_names() {
  std::string r;
  for (GgmlType s : kSupported) r += (r.empty() ? "" : ", ") + ggml_type_name(s);
  return r;
}

int64_t ggml_block_elems(GgmlType t) {
  const TypeInfo* info = find_type(t);
  return info ? info->block_elems : 0;
}

int64_t ggml_block_bytes(GgmlType t) {
  const TypeInfo* info = find_type(t);
  return info ? info->block_bytes : 0;
}

}  // namespace pc
