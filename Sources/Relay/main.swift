import RelayCore
print("prefect-push")
