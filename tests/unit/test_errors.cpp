// Error codes: to_string names the code; an Error's message keeps prose and the caller's text.
#include <gtest/gtest.h>

#include <string>

#include "rwin/rwin.h"

TEST(Errors, ToStringNamesTheCodeAndMessagesKeepProse) {
  EXPECT_STREQ(rwin::to_string(rwin::ErrorCode::OutOfBounds), "OutOfBounds");
  EXPECT_STREQ(rwin::to_string(rwin::ErrorCode::PeerFailed), "PeerFailed");
  EXPECT_STREQ(rwin::to_string(rwin::ErrorCode::UseAfterFree), "UseAfterFree");
  EXPECT_STREQ(rwin::to_string(rwin::ErrorCode::InvalidArgument), "InvalidArgument");
  const rwin::Error e(rwin::ErrorCode::OutOfBounds, "rank 0: put peer 1: dst slice ...");
  EXPECT_EQ(std::string(e.what()), "rwin: out of bounds: rank 0: put peer 1: dst slice ...");
  EXPECT_EQ(e.code(), rwin::ErrorCode::OutOfBounds);
}
