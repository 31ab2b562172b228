raise ImportError("r2med_broken needs a library that is not installed")
