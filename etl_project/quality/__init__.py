"""Data quality: Great Expectations suites per table (``suites``) and their runner (``runner``)."""
