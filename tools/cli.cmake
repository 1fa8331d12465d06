# rwin_cli: what the command-line tools share (tools/cli.h: CLI11, strict numbers, --version) and
# nlohmann-json for their machine-readable output. Header-only; the libraries never link it.
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json 3 CONFIG REQUIRED)
add_library(rwin_cli INTERFACE)
target_include_directories(rwin_cli INTERFACE ${PROJECT_SOURCE_DIR})
target_link_libraries(rwin_cli INTERFACE CLI11::CLI11)
