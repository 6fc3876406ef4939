//===- LaneTiles.h - the tile primitives on a GPU block's registers -*- C++ -*-===//
//
// The second implementation of TileBuilder (passes/TileBuilder.h): a tile is
// distributed over the registers of a block's lanes, and every primitive
// emits the per-lane arithmetic, the warp shuffles and nothing else. An
// algorithm written once against TileBuilder (passes/GatedDeltaKernel.cpp)
// becomes a lane kernel by running it on this builder; a kernel's driver
// (GpuDecodeRegisters.cpp) only loads and stores.
//
// Layouts are data, as in Triton's linear layouts: a LaneLayout says where
// every element of a tile lives,
//
//   coordinates(register r, lane l, warp w) = regs[r]
//       + sum over the set bits b of l of lanes[b]
//       + sum over the set bits b of w of warps[b],
//
// a zero basis meaning that bit holds copies. Primitives keep their
// operands' layouts (an elementwise map computes where its first full
// operand lives), reduce over lane bits with xor shuffles, and convert a
// tile between layouts explicitly (convertLayout: indexed shuffles within a
// warp). Whatever would need data from another warp, or a matrix product of
// two distributed operands, is not taken: the builder records why, and the
// driver reports it as an error instead of emitting wrong code.
//
// A tile's Value is a vector.from_elements of the lane's registers (a
// handle: primitives read the registers from the builder's table, and the
// handle is dead code once the program is built).
//
//===----------------------------------------------------------------------===//

#ifndef KDA_LOWERING_LANES_LANETILES_H
#define KDA_LOWERING_LANES_LANETILES_H

#include "passes/TileBuilder.h"

#include <array>
#include <map>
#include <optional>
#include <string>

namespace mlir::kda {

struct LaneLayout {
  using Coords = SmallVector<int64_t, 2>;
  SmallVector<int64_t, 2> shape;
  SmallVector<Coords> regs;  // per register
  SmallVector<Coords> lanes; // per lane-index bit (log2 of the warp size)
  SmallVector<Coords> warps; // per warp-index bit (log2 of the warps)

  int64_t rank() const { return shape.size(); }
  int64_t numLanes() const { return int64_t(1) << lanes.size(); }
  int64_t numWarps() const { return int64_t(1) << warps.size(); }
  Coords at(int64_t r, int64_t lane, int64_t warp) const;
  /// Lane bits whose basis is zero (they hold copies).
  int64_t replicatedLaneMask() const;
  int64_t replicatedWarpMask() const;
  bool operator==(const LaneLayout &o) const {
    return shape == o.shape && regs == o.regs && lanes == o.lanes &&
           warps == o.warps;
  }
  /// Empty when every element lives in every (lane, warp) copy exactly
  /// once, in bounds; else why not.
  std::string check() const;

  /// Every element in every lane's registers, row-major.
  static LaneLayout replicated(ArrayRef<int64_t> shape, int64_t laneBits,
                               int64_t warpBits);
  /// The 1-D layout of dimension `dim` of this one: a [shape[dim]] vector
  /// held where this layout holds that coordinate (one register per distinct
  /// coordinate). `regOf[r]` is register r's register in the slice.
  LaneLayout slice(int64_t dim, SmallVectorImpl<int64_t> *regOf = nullptr) const;
  /// Without a dimension of size 1, or with one inserted before `dim`.
  LaneLayout squeezed(int64_t dim) const;
  LaneLayout unsqueezed(int64_t dim) const;
  LaneLayout transposed() const;
  /// This layout of one warp's part ([shape] / the split), in a block of
  /// `warps` warps whose warp w holds it translated by w x `step`
  /// (zero: a copy in every warp), as a tile of `shape`.
  LaneLayout spread(ArrayRef<int64_t> shape, Coords step,
                    int64_t warps) const;
  /// The runs of registers a lane can move as one vector along dimension
  /// `dim` of a 2-D layout: (first register, length), each run's registers
  /// consecutive along `dim` with the other coordinate equal, its length a
  /// power of two, at most `most`, that divides the run's first coordinate
  /// along `dim` whatever the lane and warp (the vector stays aligned to
  /// its length). Every register is in one run, in register order.
  SmallVector<std::pair<int64_t, int64_t>> vectorRuns(int64_t dim,
                                                      int64_t most) const;
};

/// The matrix unit a lane program's products run on (the strategy's matrix
/// instruction): NVIDIA's mma.sync (with wgmma where a B operand is a
/// swizzled shared tile), AMD CDNA's MFMA (wave64: gfx90a, gfx942) or
/// RDNA3's WMMA (wave32: gfx1100).
enum class MatrixUnit { MmaSync, Mfma, Wmma };
/// A strategy's matrix instruction as lane programs take it: mfma, wmma, or
/// wmma_emulated (WMMA's programs on NVIDIA, GpuPipeline.h's emulate-wmma:
/// each step emulated, useMatrixUnit's `emulated`); anything else mma.sync.
struct UnitChoice {
  MatrixUnit unit = MatrixUnit::MmaSync;
  bool emulated = false;
};
inline UnitChoice unitChoice(StringRef instruction) {
  if (instruction == "mfma")
    return {MatrixUnit::Mfma, false};
  if (instruction == "wmma" || instruction == "wmma_emulated")
    return {MatrixUnit::Wmma, instruction == "wmma_emulated"};
  return {};
}

class LaneTileBuilder final : public TileBuilder {
public:
  /// `lane` and `warp`: index Values of the calling lane; `warpSize` and
  /// `warps` powers of two.
  LaneTileBuilder(ImplicitLocOpBuilder &b, int64_t warpSize, int64_t warps,
                  Value lane, Value warp);

  /// A tile from the lane's registers, in `layout` (checked).
  Value make(const LaneLayout &layout, ArrayRef<Value> regs);
  const LaneLayout &layoutOf(Value tile);
  ArrayRef<Value> registersOf(Value tile);
  /// Tiles of `layout.shape` that a primitive creates (outer products,
  /// fills) take this layout.
  void anchor(const LaneLayout &layout);
  /// The registers of `tile` in `to` (indexed shuffles where an element is
  /// held by another lane of the warp).
  SmallVector<Value> convertLayout(Value tile, const LaneLayout &to);
  /// Which lane a destination register reads, as a function of the calling
  /// lane: c + sum over its set bits b of m_b (additive), or c xor the xor
  /// of those m_b.
  struct LaneFunction {
    bool additive = true;
    int64_t c = 0;
    SmallVector<int64_t> m;
  };
  /// How a conversion reads a destination register: source register
  /// `srcReg`, from the lane `from` gives (none: the lane's own).
  struct ConversionStep {
    int64_t srcReg = 0;
    std::optional<LaneFunction> from;
  };
  /// Why `from` cannot be converted to `to` on warps of `warpSize` lanes,
  /// `warps` per block; empty if it can (drivers choose their layouts so).
  static std::string conversionRefusal(const LaneLayout &from,
                                       const LaneLayout &to, int64_t warpSize,
                                       int64_t warps);
  /// Whether this lane holds the first copy of its registers (the lane and
  /// warp bits that hold copies are zero): the one that stores them.
  Value holdsFirstCopy(const LaneLayout &layout);
  /// The same within the lane's warp only (copies in other warps count as
  /// first copies there): what writes a warp's own shared region.
  Value holdsFirstCopyInWarp(const LaneLayout &layout);
  /// Index of coordinate `dim` of register `r` on the calling lane.
  Value coordinate(const LaneLayout &layout, int64_t r, int64_t dim);

  /// Products of two distributed tiles (M, N, K > 1) run on NVIDIA
  /// mma.sync m16n8k16 with `operandType` operands (bf16 or f16: the
  /// strategy's matrix instruction) and f32 accumulators, or, for f32, as
  /// pairs of 3xTF32 m16n8k8 steps on the same layouts (fp32's 1e-4 bar);
  /// without it they are refused.
  /// f32 with `precise` false: one TF32 product a step (10-bit operands:
  /// the intra-chunk products of 16-bit inputs, whose decayed operands
  /// need f32's range).
  /// f32 products in 3xTF32 until turned off (the tape's adjoint of
  /// range-sensitive products), whatever useMmaSync said.
  void preciseProducts(bool on) override { forcePrecise = on; }
  void useMmaSync(Type operandType, bool precise = true) {
    mmaType = operandType;
    mmaPrecise = precise;
  }
  /// Products on `unit` with `operandType` operands: useMmaSync for
  /// MmaSync; on AMD's units, 16 x 16 x 16 steps with f32 accumulators, bf16
  /// or f16 operands as they are, f32 operands as MFMA's fp32 16x16x4
  /// steps (four a 16-deep step, full fp32) or, on WMMA (no fp32 form), as
  /// three bf16 products of operands split into a bf16 part and the rest
  /// (about 16 bits of each operand). On AMD every product is written
  /// untransposed, C = op(a) op(b): the accumulator layout is MFMA's B
  /// operand layout as it is (WMMA's after a shuffle of rows), so a state
  /// in accumulators is the B operand of the next step's products, and A
  /// operands in shared memory (makeShared, transposed or not) are read by
  /// address.
  /// `emulated` (WMMA only, for tests on NVIDIA): each step as shuffles
  /// and FMAs in fp32 (the operands rounded to the operand type as the
  /// unit rounds them), on WMMA's layouts.
  void useMatrixUnit(MatrixUnit u, Type operandType, bool emulated = false) {
    unit = u;
    mmaType = operandType;
    mmaPrecise = true;
    emulateSteps = emulated;
  }
  /// The lanes of a warp (wave) on `u`.
  static int64_t unitWarpSize(MatrixUnit u) {
    return u == MatrixUnit::Mfma ? 64 : 32;
  }
  /// One warp's fragment layouts on `u` (no warp bases: LaneLayout::spread
  /// places them): the accumulator [rows, cols], the A operand [rows, k]
  /// and the B operand [k, cols]; rows, cols and k multiples of 16 (8 for
  /// mma.sync's accumulator and B columns). MmaSync gives mmaAccumulator's,
  /// mmaOperandA's and mmaOperandB's at one warp.
  static LaneLayout unitAccumulator(MatrixUnit u, int64_t rows, int64_t cols);
  static LaneLayout unitOperandA(MatrixUnit u, int64_t rows, int64_t k);
  static LaneLayout unitOperandB(MatrixUnit u, int64_t k, int64_t cols);
  /// mma.sync m16n8k16's layouts (Triton's #mma and its dot operands): the
  /// accumulator [rows, cols] and the A operand [rows, k], the rows split
  /// over the `warps` in blocks of rows / warps (a multiple of 16); the B
  /// operand [k, cols], a copy in every warp. Products also take A split
  /// over the warps by its columns (k: partial sums across warps) or a copy
  /// in every warp (with an accumulator split by columns: each warp its
  /// columns; without: the whole product in every warp): mmaProduct.
  static LaneLayout mmaAccumulator(int64_t rows, int64_t cols, int64_t warps);
  /// A [16, cols] tile as the intra-chunk program loads it: lane (g, t)
  /// holds rows g and g + 8 (one row g on 64-lane waves) of cols / warps / 4
  /// consecutive columns (16-byte vectors), t after t, warp after warp.
  static LaneLayout rowBlocked(int64_t cols, int64_t warpSize, int64_t warps);
  static LaneLayout mmaOperandA(int64_t rows, int64_t k, int64_t warps);
  static LaneLayout mmaOperandB(int64_t k, int64_t cols, int64_t warps);
  /// A [rows, cols] tile that stays in shared memory, buffer[prefix..., r,
  /// c] (rows 16-byte aligned): only products read it, as their B operand,
  /// through ldmatrix (16-bit elements) or by address (f32 elements, for
  /// the f32 matrix instruction).
  Value makeShared(Value buffer, ValueRange prefix, ArrayRef<int64_t> shape);
  /// The same for a [rows, cols] tile stored transposed, element (i, j) at
  /// buffer[prefix..., j, i]: AMD's unit products only (a V block staged
  /// as V^T, so that the fragments that take consecutive keys read one
  /// vector).
  Value makeSharedTransposed(Value buffer, ValueRange prefix,
                             ArrayRef<int64_t> shape);

  /// A [rows, cols] tile (16-bit elements) that stays in shared memory for
  /// Hopper's wgmma, in the 128-byte swizzled form its descriptors read:
  /// column blocks of 64 elements, each [rows][64] with the 16-byte pieces
  /// of row r at piece p ^ (r % 8) (swizzledOffset). `address`: the i32
  /// shared-window byte address of the tile, a multiple of 1024. Products
  /// that take it as their B operand run on wgmma.mma_async with A from
  /// registers: B = T^T reads it K-major, B = T N-major.
  Value makeSwizzledShared(Value address, ArrayRef<int64_t> shape);
  /// Where element (row, col) of a swizzled [rows, cols] tile lives,
  /// in elements from its start.
  static Value swizzledOffset(ImplicitLocOpBuilder &b, Value row, Value col,
                              int64_t rows);

  /// Shared memory for products split over the warps by their contracted
  /// index, whose partial sums meet there: a static 1-D f32 workgroup
  /// buffer of at least warps x (the largest such product's registers per
  /// lane) x 32, two barriers a sum; or twice that, whose halves the sums
  /// take in turn, one barrier a sum. With two halves, a loop around the
  /// program must keep a barrier at its top (the staging barrier of a
  /// pipelined loop does): a body with an odd number of sums would
  /// otherwise write a half the previous iteration's last sum still reads.
  void useScratch(Value buffer) { scratch = buffer; }
  /// Sums across warps in two steps (`scatter`): warp w adds the warps'
  /// partials of registers w, w + warps, ... and leaves each sum in place,
  /// then every lane reads its registers' sums (one barrier more a sum, and
  /// about a third of the shared memory reads: 2 n + n / warps accesses a
  /// lane instead of n + warps n). The warps are added in the same order
  /// either way: the sums are the same bits.
  void useScatterSums(bool scatter) { scatterSums = scatter; }

  /// Shared memory for layout conversions within a warp that shuffles
  /// cannot make (a register that differs between the reading lanes: a
  /// column per lane to mma.sync's fragments): a static 1-D f32 workgroup
  /// buffer, warps x (rows x (cols + 1)) of the largest such tile.
  void useExchange(Value buffer) { exchange = buffer; }
  /// Rows of an exchange region padded by what gives the fewest shared
  /// memory wavefronts (bank conflicts counted on the host for the stores
  /// and the loads of each conversion, paddings 0 to 8 where the region has
  /// room) instead of by one element.
  void searchExchangeStrides(bool on) { exchangeSearch = on; }
  /// With the search: unpadded rows whose columns are permuted per row
  /// (j ^ ((i >> shift) * mult) mod cols) compete with the paddings, taken
  /// where they count fewer wavefronts (kda-compile --chunk-exchange-swizzle:
  /// its index arithmetic costs the chunk program registers).
  void searchExchangeSwizzles(bool on) { exchangeSwizzle = on; }

  /// Shared memory where park() holds tiles through a long stretch of
  /// other work (a static 1-D f32 workgroup buffer). A 2-D tile without
  /// copies goes there row-major (16-byte rows, padded against bank
  /// conflicts), and f32 products read it as their B operand straight from
  /// there (after a barrier); any other tile, each thread's registers at
  /// their own words (no barrier needed).
  void useParking(Value buffer);
  Value park(Value tile) override;

  /// Products of a copy in every warp and a B split over the warps by its
  /// columns: split by C's columns (C in the accumulator's layout, row
  /// pairs of consecutive columns) instead of run transposed (C^T's).
  void preferColumnSplits() { columnSplits = true; }

  /// AMD's units: a product whose B operand is a shared tile runs
  /// transposed, C^T = op(b)^T op(a)^T, the shared tile as the A operand
  /// (read by address) and op(a)^T as the B operand. MFMA's B operand
  /// layout is its accumulator layout, so a product's result transposed is
  /// the next one's B operand as it is (the window kernel's S^T = K Q^T,
  /// then O^T += V^T P^T: P never moves; on WMMA, by shuffles).
  void transposeSharedProducts() { sharedTransposed = true; }

  /// Why the last program could not be built; empty if it could.
  const std::string &failure() const { return error; }

  SmallVector<int64_t> shape(Value tile) override;
  Value filled(ArrayRef<int64_t> shape, double value) override;
  Value map(ArrayRef<int64_t> shape, ArrayRef<TileOperand> operands,
            MapBody body, Type resultType = {}) override;
  Value matmul(Value a, Value bTile, bool transA = false,
               bool transB = false) override;
  Value matmulAdd(Value acc, Value a, Value bTile, bool transA = false,
                  bool transB = false) override;
  Value vecmat(Value x, Value a) override;
  Value rowSum(Value a) override;
  Value rowMax(Value a) override;
  Value prefixSumRows(Value a) override;
  Value invertUnitLower(Value l) override;
  Value decayedPairs(Value a, Value bTile, Value g, bool inclusive) override;
  SmallVector<Value> decayedPairsMany(ArrayRef<Value> as, Value bTile, Value g,
                                      ArrayRef<bool> inclusive) override;
  /// decayedPairs' adjoint sums, exact for any gate: per summed row s, row
  /// s of x and g comes to every lane (rowOf), each lane adds its own
  /// registers' terms (the coefficient dP[r, s], or dP[s, r] transposed,
  /// from dP converted to the rows' own lanes), the discarded pairs with
  /// the exponent 0. The result keeps x's layout. x and g alike, their
  /// rows not split over warps.
  Value decayedApply(Value dP, Value x, Value g, bool inclusive,
                     bool transposed) override;
  Value subTile(Value tile, ArrayRef<int64_t> offsets,
                ArrayRef<int64_t> sizes) override;
  Value insertSubTile(Value sub, Value tile,
                      ArrayRef<int64_t> offsets) override;
  Value rowOf(Value tile, int64_t row) override;
  Value transpose(Value a) override;

private:
  struct Tile {
    LaneLayout layout;
    SmallVector<Value> regs;
  };
  /// Whether op(a) op(b) runs as C^T = op(b)^T op(a)^T: where op(b) is
  /// distributed over the warps by its columns (a state [K, V] split by V)
  /// or by its rows (split by K) and `a` is in shared memory (not swizzled)
  /// or a copy in every warp. The matrix instruction's A operand is then
  /// op(b)^T: its rows (op(b)'s columns) over the warps, or its contracted
  /// index (op(b)'s rows), the warps' partial products summed
  /// (crossWarpSum).
  bool runsTransposed(Value a, Value bTile, bool transB);
  /// Whether op(a) op(b) runs on AMD's units (unitProduct): a shared
  /// operand, or two distributed tiles without a vector side.
  bool onAmdUnit(Value a, Value bTile, bool transA, bool transB);
  /// That product, added to `acc` (or not, where null); the result is
  /// op(b)'s transposed accumulator layout, transposed back.
  Value transposedProduct(Value a, Value bTile, bool transA, bool transB,
                          Value acc);
  /// Records the first reason a primitive is not taken; returns a zero
  /// tile of `shape` so that building can go on to the driver's check.
  Value fail(const Twine &why, ArrayRef<int64_t> shape);
  /// Sum (or max) over coordinate `dim` of a tile: the lane's registers,
  /// then xor shuffles over the lane bits along `dim`. The result keeps the
  /// other coordinate (rank 1), or is [1] for a rank-1 tile.
  Value reduce(Value tile, int64_t dim, bool isMax);
  /// convertLayout through `exchange`, where it applies.
  std::optional<SmallVector<Value>> exchangeInWarp(const Tile &src,
                                                   const LaneLayout &to);
  static FailureOr<SmallVector<ConversionStep>>
  planConversion(const LaneLayout &from, const LaneLayout &to,
                 int64_t warpSize, int64_t warps, std::string &why);
  Value laneIndexI32(const LaneFunction &f);
  /// Whether the bits `mask` of `id` (a lane or warp index) are all zero.
  Value noneOf(Value id, int64_t mask);
  /// A product on mma.sync (useMmaSync), or on wgmma where B is a swizzled
  /// shared tile; `init` (or null: zeros) is the accumulator it adds to.
  Value mmaProduct(Value a, Value bTile, bool transB, int64_t M, int64_t K,
                   int64_t N, Value init = {});
  /// Where A and op(b)^T are distributed alike, rows as mma.sync's (g on
  /// lane bits 2..4, 8 h + 16 mt on registers) and the contracted index on
  /// lane bits 0, 1 and registers: the fragments (mmaOperandA's and
  /// mmaOperandB's register order) with the contracted index relabeled, no
  /// shuffle. False where the layouts do not allow it.
  bool relabeledOperands(Value a, Value bTile, bool transB, int64_t M,
                         int64_t KW, int64_t N, SmallVector<Value> &aRegs,
                         SmallVector<Value> &bRegs);
  /// decayedPairs of a 16-row chunk whose tiles hold mma.sync's rows, on
  /// tf32 mma.sync with the decays factored per group of keys (exact
  /// pairwise where a warp's gates would overflow every factored form).
  SmallVector<Value> factoredPairs(ArrayRef<Value> as, Value bTile, Value g,
                                   ArrayRef<bool> inclusive);
  /// decayedApply where x and g hold sixteen rows as mma.sync does and dP
  /// is whole in every warp: dP staged in the warp's exchange region, one
  /// loop over the key rows (registers bounded); empty where the layouts
  /// do not allow it (the caller takes the unrolled form).
  std::optional<Value> loopedApply(Value dP, Value x, Value g, bool inclusive,
                                   bool transposed);
  /// Stores tile `t` ([rows, < stride] in any layout whose warps hold the
  /// same part) row-major with rows of `stride` words into the warp's own
  /// exchange region, then a warp barrier; the region's base for this warp,
  /// or empty where there is no exchange region or `rows` rows do not fit.
  std::optional<Value> stageInWarp(const Tile &t, int64_t rows,
                                   int64_t stride);
  /// The same on AMD's units (useMatrixUnit): a 16-row chunk whose rows
  /// are on lane and register bits (the warps split its columns), each
  /// warp's key groups sized by its own gates, one product a group on the
  /// unit; the warps' partial sums meet once at the end. Null results
  /// where the layouts do not allow it (the caller takes another form).
  /// Whether decayedPairs of `as` against `bTile` and `g` can take
  /// unitFactoredPairs: AMD's unit with f32 operands, every tile in
  /// registers in g's layout.
  bool onAmdUnitPairs(ArrayRef<Value> as, Value bTile, Value g);
  /// A decayed-pairs tile from its registers in `accL`: the pairs j <= i
  /// (inclusive) or j < i, zero elsewhere.
  Value keptPairs(const LaneLayout &accL, ArrayRef<Value> regs,
                  bool inclusive);
  std::optional<SmallVector<Value>> unitFactoredPairs(ArrayRef<Value> as,
                                                      Value bTile, Value g,
                                                      ArrayRef<bool> inclusive);
  /// A product on AMD's matrix units (useMatrixUnit): C = op(a) op(b)
  /// (+ init), every operand in registers or a shared tile (read by
  /// address), the warps splitting rows, columns or the contracted index
  /// as the operands are distributed (mmaProduct's splits).
  Value unitProduct(Value a, bool transA, Value bTile, bool transB,
                    Value init);
  /// Orders a warp's shared-memory accesses between lanes (exchanges): a
  /// warp barrier on NVIDIA, a wave barrier on AMD (a wave runs in lock
  /// step; the barrier keeps the compiler from moving accesses across it).
  void warpSync();
  /// Two f32 values as one 32-bit register of two mmaType halves.
  Value packPair(Value lo, Value hi);
  /// A pair of halves as mma.sync's operand register (i32 for bf16, the
  /// vector itself for f16).
  static Value operandRegister(ImplicitLocOpBuilder &b, Value pair);

  struct SharedTile {
    Value buffer;
    SmallVector<Value> prefix;
    SmallVector<int64_t, 2> shape;
    Value address; // swizzled tiles (makeSwizzledShared): i32 byte address
    /// Row-major in a 1-D buffer (park): element (i, j) at base + i stride
    /// + j; stride 0 otherwise (the buffer indexed by prefix, i, j).
    int64_t base = 0, stride = 0;
    bool storedTransposed = false; // makeSharedTransposed
  };
  /// The wgmma form of mmaProduct: A's registers in mmaOperandA's layout,
  /// `acc` in mmaAccumulator's.
  /// `aTile`: A read from a swizzled shared tile instead (aRegs empty).
  Value wgmmaProduct(ArrayRef<Value> aRegs, SmallVector<Value> acc,
                     const SharedTile &t, bool transB, int64_t M, int64_t K,
                     int64_t N, const SharedTile *aTile = nullptr);
  std::map<const void *, SharedTile> shared;
  /// A handle for a tile that stays in shared memory (makeShared,
  /// makeSwizzledShared).
  Value sharedHandle(SharedTile tile);
  /// The registers of a shared tile `t` in `layout` (transposed: element
  /// (i, j) of the layout is t's (j, i)), as f32.
  SmallVector<Value> readShared(const SharedTile &t, const LaneLayout &layout,
                                bool transposed);
  Type mmaType;
  bool mmaPrecise = true;
  /// preciseProducts: 3xTF32 whatever mmaPrecise says.
  bool forcePrecise = false;
  /// Whether the next f32 product on mma.sync runs in 3xTF32.
  bool precise3xTf32() const { return mmaPrecise || forcePrecise; }
  MatrixUnit unit = MatrixUnit::MmaSync;
  bool emulateSteps = false;
  Value exchange;
  bool columnSplits = false;
  bool exchangeSearch = false;
  bool exchangeSwizzle = false;
  bool sharedTransposed = false;
  /// A product on AMD's units (unitProduct), transposed where
  /// transposeSharedProducts asks.
  Value amdProduct(Value a, bool transA, Value bTile, bool transB, Value acc);
  Value scratch;
  int64_t scratchTurn = 0; // the half the next sum takes (two halves)
  /// Whether a two-half sum's reads may still run (no barrier closed them).
  bool scratchReadsOpen = false;
  bool scatterSums = false;
  /// The sum over the warps of each register (the same lane, every warp),
  /// through `scratch`, two barriers: every warp gets the total.
  SmallVector<Value> crossWarpSum(ArrayRef<Value> regs);
  /// Whether `tile` is one constant in every lane (the same in any
  /// layout): fills and the zeros of products with a stand-in's zeros, as
  /// the builder made them (never judged from registers, which a lane
  /// harness's constant lane index folds differently lane by lane).
  bool isConstantTile(Value tile);
  Value markConstant(Value tile);
  llvm::DenseSet<const void *> constantTiles;
  /// crossWarpSum in steps: reserve room for n registers a lane, deposit
  /// each warp's partials as they are done, collect the sums (the barrier).
  struct PendingSum {
    int64_t base = 0, n = 0;
    bool twoHalves = false;
  };
  std::optional<PendingSum> reserveSum(int64_t n);
  Value sumSlot(const PendingSum &p, Value w, int64_t r);
  Value sumSlot(const PendingSum &p, Value w, Value r);
  void depositSum(const PendingSum &p, int64_t r, Value v);
  SmallVector<Value> collectSum(const PendingSum &p);

  int64_t warpSize, warps;
  Value lane, warp;
  /// The tiles by handle (a node-based map: references stay valid while
  /// primitives add tiles).
  std::map<const void *, Tile> tiles;
  /// Parked tiles: their layout and first word in `parking`. A parked
  /// tile's registers are read back where a primitive first takes it in a
  /// block (and cached for that block: later reads there reuse them).
  struct Parked {
    LaneLayout layout;
    int64_t base = 0;
    /// 0: each thread's registers at its own words (base + r * threads +
    /// thread). Else the tile row-major at base, rows `stride` words apart
    /// (each element once, by the lane that holds it: for tiles without
    /// copies), also a shared tile the products read as their B operand.
    int64_t stride = 0;
    /// Barriers the builder had emitted when it was parked: the products'
    /// reads need one more (other lanes' and warps' writes).
    int64_t barriersAtPark = 0;
  };
  /// Barriers this builder has emitted (gpu.barrier).
  int64_t barriers = 0;
  void barrier();
  /// Where a tile is distributed (in registers or parked), without reading
  /// a parked tile back; null for shared tiles.
  const LaneLayout *distribution(Value v);
  /// A parked row-major tile as the registers' tile (read back), anything
  /// else as it is.
  Value inRegistersView(Value v);
  /// Word base + i stride + j of a row-major tile in a 1-D buffer.
  Value rowMajorIndex(int64_t base, int64_t stride, Value i, Value j);
  Value parking;
  int64_t parkingWords = 0, parkingUsed = 0;
  std::map<const void *, Parked> parked;
  std::map<std::pair<const void *, Block *>, Tile> unparked;
  Tile &unpark(Value handle);
  /// Whether `v` is a tile in registers (parked ones included).
  bool inRegisters(Value v) {
    return tiles.count(v.getAsOpaquePointer()) ||
           parked.count(v.getAsOpaquePointer());
  }
  Tile &tile_(Value handle) {
    if (parked.count(handle.getAsOpaquePointer()))
      return unpark(handle);
    return tiles[handle.getAsOpaquePointer()];
  }
  SmallVector<LaneLayout> anchors;
  std::string error;
};

} // namespace mlir::kda

#endif // KDA_LOWERING_LANES_LANETILES_H
