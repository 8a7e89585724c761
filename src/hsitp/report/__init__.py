"""hsitp.report"""
