// Tests of schedules/formats.hpp: golden JSON/CSV/text files, round trips between formats,
// format detection, PyTorch-style CSV inference (idle cells, interleaving, I/W, legacy B+W), file
// and stdin I/O, atomic writes, and the error message of each kind of malformed input.
#include "schedules/formats.hpp"
#include "schedules/generators.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace paci {
namespace {

namespace fs = std::filesystem;

const std::string kGolden = PACI_GOLDEN_DIR;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_bytes(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Parses a list like "0F0 0B0 0U".
std::vector<Action> actions(std::string_view text) {
  std::vector<Action> out;
  std::istringstream in{std::string(text)};
  std::string token;
  while (in >> token) out.push_back(parse_action(token));
  return out;
}

// Runs fn, expecting an InputError whose message contains every fragment.
void expect_input_error(const std::function<void()>& fn,
                        const std::vector<std::string>& fragments) {
  try {
    fn();
  } catch (const InputError& e) {
    for (const auto& fragment : fragments)
      EXPECT_PRED_FORMAT2(testing::IsSubstring, fragment, e.what());
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected InputError containing '" << fragments.front() << "', got no error";
}

void expect_parse_error(std::string_view content, ScheduleFormat format,
                        const std::vector<std::string>& fragments) {
  expect_input_error([&] { parse_schedule(content, format, "in.x"); }, fragments);
}

// P=2, M=2, N=2, flushed 1F1B.
Schedule small_1f1b() {
  Schedule s;
  s.kind = "1f1b";
  s.stages = 2;
  s.placement = {0, 1};
  s.microbatches = 2;
  s.steps = 2;
  s.devices = {actions("0F0 0F1 0B0 0B1 0U 0F2 0F3 0B2 0B3 0U"),
               actions("1F0 1B0 1F1 1B1 1U 1F2 1B2 1F3 1B3 1U")};
  return s;
}

// P=2, M=2, N=1 with split backwards.
Schedule zero_bubble() {
  Schedule s;
  s.kind = "zb";
  s.stages = 2;
  s.placement = {0, 1};
  s.microbatches = 2;
  s.steps = 1;
  s.devices = {actions("0F0 0F1 0I0 0I1 0W0 0W1 0U"), actions("1F0 1I0 1F1 1I1 1W0 1W1 1U")};
  return s;
}

// 2 devices, 4 stages placed [0, 1, 0, 1], stashed weights.
Schedule interleaved() {
  Schedule s;
  s.kind = "interleaved";
  s.stages = 4;
  s.placement = {0, 1, 0, 1};
  s.microbatches = 2;
  s.steps = 1;
  s.weight_policy = WeightPolicy::stash;
  s.devices = {actions("0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1 0U 2U"),
               actions("1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1 1U 3U")};
  return s;
}

std::vector<Schedule> samples() {
  Schedule odd_kind = zero_bubble();
  odd_kind.kind = "my kind, \"quoted\" 100%\ttab \u00e9t\u00e9 #";
  odd_kind.weight_policy = WeightPolicy::double_buffer;
  return {small_1f1b(), zero_bubble(), interleaved(), odd_kind,
          generate_schedule("dualpipev", 2, 4, 2)};  // overlapped pairs, mixed backwards
}

constexpr ScheduleFormat kFormats[] = {ScheduleFormat::json, ScheduleFormat::csv,
                                       ScheduleFormat::text};

// A scratch folder removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path =
        fs::temp_directory_path() / ("paci_test_formats_" + std::to_string(::getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TEST(Formats, NamesRoundTrip) {
  for (ScheduleFormat format : kFormats)
    EXPECT_EQ(parse_schedule_format(to_string(format)), format);
  EXPECT_EQ(to_string(ScheduleFormat::text), "text");
  expect_input_error([] { parse_schedule_format("yaml"); }, {"unknown schedule format 'yaml'"});
}

TEST(Formats, GoldenFilesMatchWriterAndParser) {
  const Schedule s = small_1f1b();
  const std::pair<const char*, ScheduleFormat> files[] = {{"small.json", ScheduleFormat::json},
                                                          {"small.csv", ScheduleFormat::csv},
                                                          {"small.txt", ScheduleFormat::text}};
  for (const auto& [name, format] : files) {
    SCOPED_TRACE(name);
    const std::string path = kGolden + "/" + name;
    const std::string golden = read_bytes(path);
    EXPECT_EQ(write_schedule(s, format), golden);
    EXPECT_EQ(parse_schedule(golden, format, name), s);
    EXPECT_EQ(detect_schedule_format(path, golden), format);
    EXPECT_EQ(read_schedule(path), s);
  }
}

TEST(Formats, JsonLayoutIsExact) {
  Schedule s = small_1f1b();
  s.steps = 1;
  s.devices = {actions("0F0 0F1 0B0 0B1 0U"), actions("1F0 1B0 1F1 1B1 1U")};
  EXPECT_EQ(write_schedule(s, ScheduleFormat::json),
            "{\n"
            "  \"format\": \"paci.schedule/1\",\n"
            "  \"kind\": \"1f1b\",\n"
            "  \"stages\": 2,\n"
            "  \"placement\": [0, 1],\n"
            "  \"microbatches\": 2,\n"
            "  \"steps\": 1,\n"
            "  \"weight_policy\": \"current\",\n"
            "  \"devices\": [\n"
            "    [\"0F0\", \"0F1\", \"0B0\", \"0B1\", \"0U\"],\n"
            "    [\"1F0\", \"1B0\", \"1F1\", \"1B1\", \"1U\"]\n"
            "  ]\n"
            "}\n");
  EXPECT_EQ(write_schedule(s, ScheduleFormat::csv),
            "# paci.schedule/1 kind=1f1b stages=2 microbatches=2 steps=1 weight_policy=current "
            "placement=0,1\n0F0,0F1,0B0,0B1,0U\n1F0,1B0,1F1,1B1,1U\n");
  EXPECT_EQ(write_schedule(s, ScheduleFormat::text),
            "# paci.schedule/1 kind=1f1b stages=2 microbatches=2 steps=1 weight_policy=current "
            "placement=0,1\n0F0 0F1 0B0 0B1 0U\n1F0 1B0 1F1 1B1 1U\n");
}

TEST(Formats, JsonEscapesKind) {
  Schedule s = small_1f1b();
  s.kind = "a\"b\\c\n";
  const std::string json = write_schedule(s, ScheduleFormat::json);
  EXPECT_NE(json.find(R"("kind": "a\"b\\c\n",)"), std::string::npos) << json;
  EXPECT_EQ(parse_schedule(json, ScheduleFormat::json, "x").kind, s.kind);
}

TEST(Formats, HeaderEscapesKind) {
  Schedule s = small_1f1b();
  s.kind = "a b=c%\u00e9";
  const std::string csv = write_schedule(s, ScheduleFormat::csv);
  EXPECT_EQ(csv.substr(0, csv.find(" stages=")), "# paci.schedule/1 kind=a%20b%3Dc%25%C3%A9");
  EXPECT_EQ(parse_schedule(csv, ScheduleFormat::csv, "x").kind, s.kind);
}

TEST(Formats, EveryFormatRoundTrips) {
  for (const Schedule& s : samples()) {
    SCOPED_TRACE(s.kind);
    for (ScheduleFormat format : kFormats) {
      SCOPED_TRACE(to_string(format));
      const std::string written = write_schedule(s, format);
      const Schedule parsed = parse_schedule(written, format, "round-trip");
      EXPECT_EQ(parsed, s);
      EXPECT_EQ(write_schedule(parsed, format), written);
    }
  }
}

using ::testing::HasSubstr;

TEST(Formats, OverlappedPairsAreOneCellAndPartOfEquality) {
  const Schedule s = generate_schedule("dualpipev", 2, 4, 1);
  ASSERT_TRUE(s.has_overlap());
  const std::string csv = write_schedule(s, ScheduleFormat::pytorch);
  EXPECT_THAT(csv, HasSubstr(",(0F3;3B1)OVERLAP_F_B,"));  // PyTorch's own cell
  Schedule back = parse_schedule(csv, ScheduleFormat::pytorch, "p.csv");
  back.kind = s.kind;  // PyTorch's file has no header
  EXPECT_EQ(back, s);  // the pair marks too
  EXPECT_EQ(write_schedule(back, ScheduleFormat::pytorch), csv);
  Schedule apart = s;  // the same actions, run one after the other
  for (auto& list : apart.devices)
    for (Action& a : list) a.overlap = Overlap::none;
  EXPECT_FALSE(apart.has_overlap());
  EXPECT_FALSE(apart == s);
  EXPECT_EQ(
      parse_schedule(write_schedule(apart, ScheduleFormat::text), ScheduleFormat::text, "t.txt"),
      apart);
}

TEST(Formats, JsonToCsvToTextToJson) {
  for (const Schedule& s : samples()) {
    SCOPED_TRACE(s.kind);
    const std::string json = write_schedule(s, ScheduleFormat::json);
    const Schedule from_json = parse_schedule(json, ScheduleFormat::json, "a.json");
    const Schedule from_csv = parse_schedule(write_schedule(from_json, ScheduleFormat::csv),
                                             ScheduleFormat::csv, "b.csv");
    const Schedule from_text = parse_schedule(write_schedule(from_csv, ScheduleFormat::text),
                                              ScheduleFormat::text, "c.txt");
    EXPECT_EQ(from_text, s);
    EXPECT_EQ(write_schedule(from_text, ScheduleFormat::json), json);
  }
}

TEST(Formats, JsonReaderAcceptsAnyLayoutAndIgnoresUnknownKeys) {
  const std::string json =
      R"({"devices":[["0F0","0B0","0U"],["1F0","1B0","1U"]],"weight_policy":"stash",)"
      R"("steps":1,"microbatches":1,"placement":[0,1],"stages":2,"kind":"k",)"
      R"("future":{"x":[1,2]},"format":"paci.schedule/1"})";
  const Schedule s = parse_schedule(json, ScheduleFormat::json, "x.json");
  EXPECT_EQ(s.kind, "k");
  EXPECT_EQ(s.weight_policy, WeightPolicy::stash);
  EXPECT_EQ(s.placement, (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(s.devices[1], actions("1F0 1B0 1U"));
}

TEST(Formats, DetectsByExtensionThenContent) {
  EXPECT_EQ(detect_schedule_format("a/b.json", "0F0 0B0"), ScheduleFormat::json);
  EXPECT_EQ(detect_schedule_format("B.JSON", ""), ScheduleFormat::json);
  EXPECT_EQ(detect_schedule_format("x.Csv", "{"), ScheduleFormat::csv);
  EXPECT_EQ(detect_schedule_format("x.txt", "0F0,0B0"), ScheduleFormat::text);
  EXPECT_EQ(detect_schedule_format("x.TEXT", "{"), ScheduleFormat::text);
  EXPECT_EQ(detect_schedule_format("-", "  \n {\"format\": 1}"), ScheduleFormat::json);
  EXPECT_EQ(detect_schedule_format("", "\xEF\xBB\xBF{}"), ScheduleFormat::json);
  EXPECT_EQ(detect_schedule_format("sched.dat", "# a, b\n\n0F0,0B0\n"), ScheduleFormat::csv);
  EXPECT_EQ(detect_schedule_format("sched", "# a, b\n0F0 0B0 0U\n1F0,1B0\n"), ScheduleFormat::text);
  EXPECT_EQ(detect_schedule_format("-", "# only a comment\n"), ScheduleFormat::text);
}

TEST(Formats, PyTorch1F1BWithIdleCells) {
  const Schedule s = read_schedule(kGolden + "/pytorch_1f1b.csv");
  EXPECT_EQ(s.kind, "custom");
  EXPECT_EQ(s.stages, 2);
  EXPECT_EQ(s.placement, (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(s.microbatches, 4);
  EXPECT_EQ(s.steps, 1);
  EXPECT_EQ(s.weight_policy, WeightPolicy::current);
  ASSERT_EQ(s.num_devices(), 2);
  EXPECT_EQ(s.devices[0], actions("0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3 0U"));
  EXPECT_EQ(s.devices[1], actions("1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3 1U"));
}

TEST(Formats, PyTorchInterleavedInfersPlacement) {
  const Schedule s = read_schedule(kGolden + "/pytorch_interleaved.csv");
  EXPECT_EQ(s.stages, 4);
  EXPECT_EQ(s.placement, (std::vector<std::int32_t>{0, 1, 0, 1}));
  EXPECT_EQ(s.microbatches, 2);
  EXPECT_EQ(s.steps, 1);
  EXPECT_EQ(s.devices[0], actions("0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1 0U 2U"));
  EXPECT_EQ(s.devices[1], actions("1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1 1U 3U"));
}

TEST(Formats, PyTorchZeroBubbleAndLegacyBackward) {
  const Schedule zb = read_schedule(kGolden + "/pytorch_zb.csv");
  EXPECT_EQ(zb.stages, 2);
  EXPECT_EQ(zb.microbatches, 2);
  EXPECT_EQ(zb.devices[0], actions("0F0 0F1 0I0 0I1 0W0 0W1 0U"));
  EXPECT_EQ(zb.devices[1], actions("1F0 1I0 1F1 1I1 1W0 1W1 1U"));
  // A pair's B is a full backward: the old B-with-W rule leaves it (validate() then names the W).
  const Schedule paired =
      parse_schedule("0F0 0F1 (0F2;0B0)OVERLAP_F_B 0W0\n", ScheduleFormat::text, "p.txt");
  EXPECT_EQ(paired.devices[0][3].kind, ActionKind::B);
  // Older files write I as B: B(s, m) together with W(s, m) reads as I(s, m).
  const Schedule legacy = read_schedule(kGolden + "/pytorch_legacy_bw.csv");
  EXPECT_EQ(legacy, zb);
  // A B without its W stays a full backward, also in text and with a header.
  const Schedule mixed = parse_schedule("# paci.schedule/1 kind=mix\n0F0 0B0 0F1 0B1 0W1 0U\n",
                                        ScheduleFormat::text, "m.txt");
  EXPECT_EQ(mixed.devices[0], actions("0F0 0B0 0F1 0I1 0W1 0U"));
  EXPECT_EQ(mixed.kind, "mix");
  EXPECT_EQ(mixed.microbatches, 2);
}

TEST(Formats, HeaderValuesWinAndMissingKeysAreInferred) {
  // Header steps=1 with U actions present; microbatches and placement inferred.
  const Schedule s = parse_schedule(
      "# a comment\n# paci.schedule/1 steps=1 weight_policy=double_buffer\n\n"
      "  0F0, 0F1 ,0B0,0B1,0U  \n1F0,1B0,1F1,1B1,1U\n",
      ScheduleFormat::csv, "h.csv");
  EXPECT_EQ(s.kind, "custom");
  EXPECT_EQ(s.weight_policy, WeightPolicy::double_buffer);
  EXPECT_EQ(s.microbatches, 2);
  EXPECT_EQ(s.placement, (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(s.devices[0], actions("0F0 0F1 0B0 0B1 0U"));
  // Text accepts commas and any whitespace between tokens; U counts give the steps.
  const Schedule t = parse_schedule("0F0\t0B0,0U 0F1  0B1 0U\n", ScheduleFormat::text, "t.txt");
  EXPECT_EQ(t.steps, 2);
  EXPECT_EQ(t.microbatches, 1);
  EXPECT_EQ(t.devices[0], actions("0F0 0B0 0U 0F1 0B1 0U"));
}

TEST(Formats, ReadsAndWritesFiles) {
  TempDir dir;
  for (const Schedule& s : samples()) {
    for (ScheduleFormat format : kFormats) {
      const fs::path path =
          dir.path / (std::string("s.") +
                      (format == ScheduleFormat::text ? "txt" : std::string(to_string(format))));
      write_schedule_file(s, path.string(), format);
      EXPECT_EQ(read_schedule(path.string()), s);
      EXPECT_EQ(read_bytes(path), write_schedule(s, format));
    }
  }
  // No temporary files are left behind.
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path)) ++files;
  EXPECT_EQ(files, 3u);
}

TEST(Formats, AtomicWriteReplacesAndReportsFailure) {
  TempDir dir;
  const fs::path path = dir.path / "out.json";
  write_file_atomic(path.string(), "first");
  write_file_atomic(path.string(), "second");
  EXPECT_EQ(read_bytes(path), "second");
  try {
    write_file_atomic((dir.path / "missing" / "x.json").string(), "data");
    ADD_FAILURE() << "expected an error";
  } catch (const InputError& e) {
    ADD_FAILURE() << "I/O failures are not InputError: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_PRED_FORMAT2(testing::IsSubstring, "missing/x.json", e.what());
  }
  // Renaming onto a folder fails; the temporary file is removed.
  fs::create_directory(dir.path / "folder");
  EXPECT_THROW(write_file_atomic((dir.path / "folder").string(), "data"), std::runtime_error);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path)) ++entries;
  EXPECT_EQ(entries, 2u);  // out.json and folder
}

TEST(Formats, ReadsStandardInput) {
  TempDir dir;
  const fs::path good = dir.path / "in";
  write_bytes(good, read_bytes(kGolden + "/small.txt"));
  ASSERT_NE(std::freopen(good.c_str(), "rb", stdin), nullptr);
  EXPECT_EQ(read_schedule("-"), small_1f1b());
  const fs::path bad = dir.path / "bad";
  write_bytes(bad, "0F0,0X1\n");
  ASSERT_NE(std::freopen(bad.c_str(), "rb", stdin), nullptr);
  expect_input_error([] { read_schedule("-"); }, {"<stdin>: row 1, cell 2: bad action '0X1'"});
  EXPECT_NE(std::freopen("/dev/null", "rb", stdin), nullptr);
}

TEST(Formats, MissingFile) {
  expect_input_error([] { read_schedule("/nonexistent/paci/s.json"); },
                     {"/nonexistent/paci/s.json: cannot open: No such file or directory"});
}

TEST(Formats, EmptyAndBinaryInputs) {
  for (ScheduleFormat format : kFormats) {
    expect_parse_error("", format, {"in.x: empty file"});
    expect_parse_error(" \n\t\r\n", format, {"in.x: empty file"});
    expect_parse_error(std::string("0F0\0", 4), format, {"in.x: binary file, not a schedule"});
    expect_parse_error("0F0 \xff\xfe", format, {"in.x: binary file, not a schedule"});
    expect_parse_error("\xC0\xAF", format, {"binary file"});  // overlong '/'
  }
  TempDir dir;
  write_bytes(dir.path / "empty.json", "");
  expect_input_error([&] { read_schedule((dir.path / "empty.json").string()); },
                     {"empty.json: empty file"});
  write_bytes(dir.path / "b.csv", std::string("\x7f"
                                              "ELF\x02\x01\x00\x00",
                                              8));
  expect_input_error([&] { read_schedule((dir.path / "b.csv").string()); },
                     {"b.csv: binary file, not a schedule"});
}

TEST(Formats, MalformedJson) {
  const std::string golden = read_bytes(kGolden + "/small.json");
  expect_parse_error(golden.substr(0, golden.size() / 2), ScheduleFormat::json,
                     {"in.x: line ", "malformed JSON", "unexpected end of input"});
  expect_parse_error("{\n  \"format\": x\n}", ScheduleFormat::json,
                     {"in.x: line 2, column 13: malformed JSON"});
  expect_parse_error("[1, 2]", ScheduleFormat::json, {"top level must be a JSON object"});

  auto with = [&](const std::string& from, const std::string& to) {
    std::string json = golden;
    const std::size_t at = json.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return json.replace(at, from.size(), to);
  };
  expect_parse_error(with("paci.schedule/1", "paci.schedule/2"), ScheduleFormat::json,
                     {"in.x: unsupported format 'paci.schedule/2' (expected paci.schedule/1)"});
  expect_parse_error(with("\"steps\": 2,", ""), ScheduleFormat::json,
                     {"in.x: missing key 'steps'"});
  expect_parse_error(with("\"stages\": 2", "\"stages\": \"2\""), ScheduleFormat::json,
                     {"in.x: key 'stages' must be an integer"});
  expect_parse_error(with("\"stages\": 2", "\"stages\": 2.5"), ScheduleFormat::json,
                     {"in.x: key 'stages' must be an integer"});
  expect_parse_error(with("\"steps\": 2", "\"steps\": 4294967296"), ScheduleFormat::json,
                     {"in.x: key 'steps' is out of range"});
  expect_parse_error(with("current", "sometimes"), ScheduleFormat::json,
                     {"in.x: unknown weight policy 'sometimes'"});
  expect_parse_error(with("\"stages\": 2", "\"stages\": 0"), ScheduleFormat::json,
                     {"in.x: stage count must be positive, got 0"});
  expect_parse_error(with("\"microbatches\": 2", "\"microbatches\": -3"), ScheduleFormat::json,
                     {"in.x: micro-batches per step must be positive, got -3"});
  expect_parse_error(with("[0, 1]", "[0, 2]"), ScheduleFormat::json,
                     {"in.x: stage 1 is placed on device 2"});
  expect_parse_error(with("[0, 1]", "[0, \"1\"]"), ScheduleFormat::json,
                     {"in.x: placement[1] must be an integer"});
  expect_parse_error(with("\"1F1\"", "\"0X3\""), ScheduleFormat::json,
                     {"in.x: devices[1][2]: bad action '0X3' (expected"});
  expect_parse_error(with("\"1F1\"", "3"), ScheduleFormat::json,
                     {"in.x: devices[1][2] must be a string"});
  expect_parse_error(with("\"0U\"", "\"0SEND_F1\""), ScheduleFormat::json,
                     {"devices[0][4]: unsupported action '0SEND_F1' (paci reads compute-only"});
}

TEST(Formats, MalformedRows) {
  expect_parse_error("0F0,0F1\n1F0,,0X3\n", ScheduleFormat::csv,
                     {"in.x: row 2, cell 3: bad action '0X3' (expected"});
  expect_parse_error("# c\n0F0 0F1\n1F0  , 0X3\n", ScheduleFormat::text,
                     {"in.x: line 3, token 2: bad action '0X3'"});
  for (const char* token : {"0SEND_F1", "0RECV_B2", "0UNSHARD", "0RESHARD", "0REDUCE_GRAD"})
    expect_parse_error(std::string("0F0,") + token + "\n", ScheduleFormat::csv,
                       {std::string("row 1, cell 2: unsupported action '") + token +
                        "' (paci reads compute-only schedules)"});
  // PyTorch's DualPipeV cell for an overlapped pair: a forward and a full backward, nothing else.
  for (const auto& [cell, why] : std::vector<std::pair<std::string, std::string>>{
           {"(0F1;3B0", "no closing parenthesis"},
           {"(0F1;3B0)", "it does not end in )OVERLAP_F_B"},
           {"(0F1;3B0)OVERLAP_F_BX", "it does not end in )OVERLAP_F_B"},
           {"(0F1)OVERLAP_F_B", "it does not hold exactly two actions"},
           {"(0F1;3B0;1F2)OVERLAP_F_B", "it does not hold exactly two actions"},
           {"(3B0;0F1)OVERLAP_F_B", "3B0 and 0F1 are not a forward and a full backward"},
           {"(0F1;3I0)OVERLAP_F_B", "0F1 and 3I0 are not a forward and a full backward"}})
    expect_parse_error("0F0," + cell + "\n", ScheduleFormat::csv,
                       {"row 1, cell 2: bad overlapped pair '" + cell + "': " + why});
  expect_parse_error("0F0,(0F1;3X0)OVERLAP_F_B\n", ScheduleFormat::csv,
                     {"row 1, cell 2: bad action '3X0'"});
  EXPECT_THROW(parse_action("(0F1;3B0)OVERLAP_F_B"), InputError);  // one action, not a pair
  expect_parse_error(
      "0F0,1F0\n1B0,0B0\n", ScheduleFormat::csv,
      {"in.x: stage 1 appears on two devices: row 1 (device 0) and row 2 (device 1)"});
  expect_parse_error("0F0 0B0\n2F0 2B0\n", ScheduleFormat::text,
                     {"in.x: stage 1 has no actions, but the schedule has 3 stages"});
  expect_parse_error("0F0 0B0 0U 0F1 0B1 0U\n1F0 1B0 1U 1F1 1B1\n", ScheduleFormat::text,
                     {"stage 0 has 2, stage 1 has 1"});
  expect_parse_error("0F0 0B0 0F1 0B1 0F2 0B2 0U 0U\n", ScheduleFormat::text,
                     {"micro-batch indices 0..2 (3 micro-batches) do not split evenly into 2"});
  expect_parse_error("# only comments\n\n", ScheduleFormat::csv, {"in.x: no device rows"});
  expect_parse_error("999999999F0\n", ScheduleFormat::text, {"stage 0 has no actions"});
}

TEST(Formats, MalformedHeaders) {
  const std::string rows = "0F0,0B0,0U\n";
  auto header = [&](const std::string& items) {
    return "# paci.schedule/1 " + items + "\n" + rows;
  };
  expect_parse_error(
      "# paci.schedule/2 stages=1\n" + rows, ScheduleFormat::csv,
      {"in.x: row 1: unsupported format 'paci.schedule/2' (expected paci.schedule/1)"});
  expect_parse_error("#paci.schedule/1 color=red\n0F0 0B0 0U\n", ScheduleFormat::text,
                     {"in.x: line 1: unknown metadata key 'color'"});
  expect_parse_error(header("weight_policy=sometimes"), ScheduleFormat::csv,
                     {"row 1: unknown weight policy 'sometimes'"});
  expect_parse_error(header("stages=0"), ScheduleFormat::csv,
                     {"row 1: metadata key 'stages' must be positive, got 0"});
  expect_parse_error(header("microbatches=-2"), ScheduleFormat::csv,
                     {"metadata key 'microbatches' must be positive, got -2"});
  expect_parse_error(header("steps=two"), ScheduleFormat::csv,
                     {"metadata key 'steps' must be an integer, got 'two'"});
  expect_parse_error(header("steps=1 steps=1"), ScheduleFormat::csv,
                     {"metadata key 'steps' is given twice"});
  expect_parse_error(header("stages"), ScheduleFormat::csv, {"'stages' is not key=value"});
  expect_parse_error(header("placement=0,,1"), ScheduleFormat::csv,
                     {"metadata key 'placement' must be an integer, got ''"});
  expect_parse_error(header("stages=2 placement=0,1"), ScheduleFormat::csv,
                     {"in.x: stage 1 is placed on device 1, but there are 1 devices"});
  expect_parse_error(header("kind=a%2"), ScheduleFormat::csv, {"bad %-escape in kind"});
  expect_parse_error(header("kind=%f1b"), ScheduleFormat::csv,
                     {"kind '%f1b' is not valid UTF-8 text"});
  expect_parse_error(rows + "# paci.schedule/1 steps=1\n", ScheduleFormat::csv,
                     {"row 2: the metadata header must come before the device rows"});
  expect_parse_error(header("steps=1") + "# paci.schedule/1 steps=1\n", ScheduleFormat::csv,
                     {"row 3: second metadata header (the first is on row 1)"});
}

TEST(Formats, LargeScheduleRoundTrips) {
  // 16 devices x 6,002 actions: the writers and readers agree at scale.
  Schedule s;
  s.kind = "big";
  s.stages = 16;
  s.microbatches = 1000;
  s.steps = 2;
  for (std::int32_t d = 0; d < s.stages; ++d) {
    s.placement.push_back(d);
    auto& list = s.devices.emplace_back();
    for (std::int32_t step = 0; step < s.steps; ++step) {
      for (std::int32_t m = 0; m < s.microbatches; ++m) {
        const std::int32_t mb = step * s.microbatches + m;
        list.push_back({ActionKind::F, d, mb});
        list.push_back({ActionKind::I, d, mb});
        list.push_back({ActionKind::W, d, mb});
      }
      list.push_back({ActionKind::U, d, -1});
    }
  }
  for (ScheduleFormat format : kFormats)
    EXPECT_EQ(parse_schedule(write_schedule(s, format), format, "big"), s);
}

}  // namespace
}  // namespace paci
